# Sourced by the scripts: the environment meshtp's MPI runs need on this kind of machine.
# Open MPI refuses to run as root without these two, and more ranks than cores need
# oversubscription; oversubscribed ranks should yield the core while they wait.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1
# One BLAS thread per rank: meshtp runs one rank per core.
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
