#!/usr/bin/env bash
# cluster.sh — a cluster of H hosts on this one machine, for running meshtp across a real
# (emulated) network: each host is a Linux network namespace with its own address on a
# bridge, its egress shaped to a link rate (tc's tbf), and jobs launched across the hosts by
# Open MPI's own rsh launcher through an agent that enters a host's namespace (no ssh).
# docs/multinode.md is the runbook; docs/cluster.md the measurements.
#
#   scripts/cluster.sh [--name N] up --hosts H --ranks-per-host R --link-mbit X
#   scripts/cluster.sh [--name N] run [--hosts 1,2,…] [--grace S] -- CMD…
#   scripts/cluster.sh [--name N] cut HOST | restore HOST
#   scripts/cluster.sh [--name N] down
#   scripts/cluster.sh [--name N] show
#
# up      makes namespaces mtp-N-h1…hH, a bridge mtp-N in this (the "login") namespace with
#         address 10.213.K.254/24, host i at 10.213.K.i on a veth pair (eth0 inside), a tbf
#         qdisc of X Mbit/s on each host's egress, a hostfile (R slots per host) and the
#         launch agent, in the state directory /run/mtp-cluster/N. K is the first free subnet.
#         Every host sees its own STATE/disk (STATE/disks/mtp-N-hI, bind-mounted in the
#         host's mount namespace): a node-local directory at one path, for per-node
#         checkpoints; the rest of the file system is shared, like NFS.
# run     runs `mpirun -np H·R CMD…` (ranks filled host by host: ranks 0…R−1 on host 1, …)
#         from this namespace with the hostfile, the agent, shared memory inside a host and
#         TCP between hosts (btl self,vader,tcp; btl_tcp_if_include / oob_tcp_if_include the
#         cluster's subnet), and returns its exit status. --hosts runs on those hosts only
#         (the others stay up, e.g. a resume without a lost host). A rank that exits non-zero
#         is recorded; when mpirun has not ended --grace seconds (default 3) later — its abort
#         cannot reach a host whose link is cut, and Open MPI waits for it — the job is ended
#         here: mpirun and every process in the job's hosts are killed, and run returns that
#         rank's exit status. Ctrl-C / SIGTERM to run is passed on to mpirun, then the same.
#         A host given twice in --hosts is refused; a host whose link is cut is named before
#         the launch (an error, nothing started), and a host cut as the job starts, before
#         any of its ranks runs, ends the job --grace seconds later, naming it.
#         One run at a time per cluster: when it ends, it kills what is left in its hosts.
# cut     takes host HOST's link down (its bridge-side veth); restore brings it back up.
# down    kills every process left in the hosts, removes the namespaces, the bridge and the
#         state directory. Idempotent: it removes whatever of cluster N exists, and nothing else.
# show    prints the hosts, addresses, link rate and the hostfile.
#
# N (default "mtp", or $MESHTP_CLUSTER): 1–6 lowercase letters or digits, so several clusters
# can exist at once. Every command needs root and `ip netns` (Debian's iproute2); where they
# are missing, up says why and exits 77, so the tests that use it skip (ctest
# SKIP_RETURN_CODE 77). Other errors exit 2 (usage) or 1.
set -uo pipefail

skip_code=77
die() {
  echo "cluster.sh: error: $*" >&2
  exit 1
}
usage() {
  echo "cluster.sh: error: $*" >&2
  echo "usage: cluster.sh [--name N] up --hosts H --ranks-per-host R --link-mbit X | run [--hosts LIST] [--grace S] -- CMD… | cut HOST | restore HOST | down | show" >&2
  exit 2
}

name=${MESHTP_CLUSTER:-mtp}
if [ "${1:-}" = "--name" ]; then
  [ $# -ge 2 ] || usage "--name needs a value"
  name=$2
  shift 2
fi
[[ "$name" =~ ^[a-z0-9]{1,6}$ ]] || usage "cluster name '$name': 1 to 6 lowercase letters or digits"
[ $# -ge 1 ] || usage "no command"
command=$1
shift

state=/run/mtp-cluster/$name
bridge=mtp-$name
ns_of() { echo "mtp-$name-h$1"; }   # host i's namespace
veth_of() { echo "mtp-$name-$1"; }  # host i's bridge-side veth (≤ 15 characters)

# Can this process make network namespaces? Exits 77 with the reason where not.
need_namespaces() {
  if [ "$(id -u)" -ne 0 ]; then
    echo "cluster.sh: cannot make network namespaces: not root (uid $(id -u)); skipping" >&2
    exit $skip_code
  fi
  if ! command -v ip >/dev/null || ! command -v tc >/dev/null; then
    echo "cluster.sh: cannot make network namespaces: 'ip' or 'tc' not found (Debian package iproute2: apt-get install iproute2); skipping" >&2
    exit $skip_code
  fi
  local probe="mtp-probe-$$"
  if ! ip netns add "$probe" 2>/dev/null; then
    echo "cluster.sh: cannot make network namespaces: 'ip netns add' failed here (a container without CAP_SYS_ADMIN?); skipping" >&2
    exit $skip_code
  fi
  ip netns del "$probe"
  if ! unshare --uts true 2>/dev/null; then
    echo "cluster.sh: cannot make a host: 'unshare --uts' (its own hostname) failed here; skipping" >&2
    exit $skip_code
  fi
}

positive_int() {  # positive_int FLAG VALUE
  [[ "$2" =~ ^[1-9][0-9]*$ ]] || usage "$1 '$2': expected a positive integer"
}

load_state() {
  [ -f "$state/config" ] || die "cluster '$name' is not up (no $state/config): run 'cluster.sh --name $name up …' first"
  # shellcheck source=/dev/null
  source "$state/config"  # hosts, ranks_per_host, link_mbit, subnet
  : "${hosts:?}" "${ranks_per_host:?}" "${link_mbit:?}" "${subnet:?}"
}

# down: remove everything cluster $name made, whatever state it is in.
cmd_down() {
  [ "$(id -u)" -eq 0 ] || { echo "cluster.sh: not root: nothing of cluster '$name' can exist" >&2; return 0; }
  command -v ip >/dev/null || return 0
  local ns pids
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^mtp-$name-h[0-9]+$"); do
    pids=$(ip netns pids "$ns" 2>/dev/null)
    # shellcheck disable=SC2086
    [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
    ip netns del "$ns" 2>/dev/null
  done
  ip link del "$bridge" 2>/dev/null
  local link
  for link in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | grep -E "^mtp-$name-[0-9]+$"); do
    ip link del "$link" 2>/dev/null
  done
  rm -rf "$state"
  return 0
}

cmd_up() {
  local hosts="" rph="" mbit=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --hosts) hosts=${2:-}; shift 2 || usage "--hosts needs a value" ;;
      --ranks-per-host) rph=${2:-}; shift 2 || usage "--ranks-per-host needs a value" ;;
      --link-mbit) mbit=${2:-}; shift 2 || usage "--link-mbit needs a value" ;;
      *) usage "up: unknown argument '$1'" ;;
    esac
  done
  [ -n "$hosts" ] && [ -n "$rph" ] && [ -n "$mbit" ] || usage "up needs --hosts, --ranks-per-host and --link-mbit"
  positive_int --hosts "$hosts"
  positive_int --ranks-per-host "$rph"
  positive_int --link-mbit "$mbit"
  [ "$hosts" -le 32 ] || usage "--hosts $hosts: at most 32"
  need_namespaces
  command -v mpirun >/dev/null || die "mpirun not found (Debian package openmpi-bin; scripts/install.sh)"
  [ ! -e "$state" ] || die "cluster '$name' is already up ($state): 'cluster.sh --name $name down' first"
  # The first 10.213.K.0/24 that no cluster and no interface here uses.
  local k subnet=""
  for k in $(seq 1 254); do
    grep -qs "^subnet=10.213.$k\$" /run/mtp-cluster/*/config && continue
    ip -o addr show 2>/dev/null | grep -q " 10\.213\.$k\." && continue
    subnet=10.213.$k
    break
  done
  [ -n "$subnet" ] || die "no free subnet 10.213.K.0/24 (K = 1…254) for cluster '$name'"
  mkdir -p "$state/marks" "$state/disk"
  trap 'echo "cluster.sh: up failed; removing what it made" >&2; cmd_down' EXIT
  set -e
  ip link add "$bridge" type bridge
  ip addr add "$subnet.254/24" dev "$bridge"
  ip link set "$bridge" up
  local i ns veth
  : >"$state/hostfile"
  for i in $(seq 1 "$hosts"); do
    ns=$(ns_of "$i")
    veth=$(veth_of "$i")
    ip netns add "$ns"
    ip link add "$veth" type veth peer name eth0 netns "$ns"
    ip link set "$veth" master "$bridge" up
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "$subnet.$i/24" dev eth0
    ip -n "$ns" link set eth0 up
    # Egress shaping: a token bucket at the link rate (netem, for delay, is not needed here).
    tc -n "$ns" qdisc add dev eth0 root tbf rate "${mbit}mbit" burst 64kb latency 50ms
    echo "$subnet.$i slots=$rph" >>"$state/hostfile"
    mkdir -p "$state/disks/$ns"
  done
  # The launch agent: Open MPI runs `AGENT HOST orted …` for every host; enter its network
  # namespace, and a UTS namespace named after it: the host's own hostname, which its ranks
  # report (MPI_Get_processor_name) and Open MPI's shared-memory files are named by (two
  # hosts of one name would share them). `ip netns exec` also gives the host a mount
  # namespace (slave: nothing mounted in it shows outside): there $state/disk is the host's
  # own directory $state/disks/<host>, a node-local disk at one path on every host.
  cat >"$state/agent" <<EOF
#!/bin/sh
host=\$1
shift
ns=mtp-$name-h\${host##*.}
exec ip netns exec "\$ns" unshare --uts /bin/sh -c "hostname \$ns && mount --bind $state/disks/\$ns $state/disk && \$*"
EOF
  # Every rank runs under this wrapper: it passes signals on and, when the rank exits
  # non-zero, records it for `run` (marks/RANK holds the exit status).
  cat >"$state/rank" <<EOF
#!/bin/bash
"\$@" &
child=\$!
for sig in TERM INT HUP USR1 USR2; do trap "kill -\$sig \$child 2>/dev/null" \$sig; done
while :; do
  wait \$child
  rc=\$?
  kill -0 \$child 2>/dev/null || break
done
[ \$rc -ne 0 ] && echo \$rc >"$state/marks/\${OMPI_COMM_WORLD_RANK:-x}"
exit \$rc
EOF
  chmod +x "$state/agent" "$state/rank"
  printf 'hosts=%s\nranks_per_host=%s\nlink_mbit=%s\nsubnet=%s\n' "$hosts" "$rph" "$mbit" \
    "$subnet" >"$state/config"
  set +e
  trap - EXIT
  echo "cluster '$name' up: $hosts hosts × $rph ranks, links ${mbit} Mbit/s, subnet $subnet.0/24, hostfile $state/hostfile, node-local disk $state/disk"
}

# up or down: host i's bridge-side link as the kernel sees it ("unknown" when it is missing).
link_state() { cat /sys/class/net/"$(veth_of "$1")"/operstate 2>/dev/null || echo unknown; }

# Processes of the given hosts' namespaces.
host_pids() {
  local i
  for i in "$@"; do ip netns pids "$(ns_of "$i")" 2>/dev/null; done
}

cmd_run() {
  local only="" grace=3
  while [ $# -gt 0 ]; do
    case "$1" in
      --hosts) only=${2:-}; shift 2 || usage "--hosts needs a value" ;;
      --grace) grace=${2:-}; shift 2 || usage "--grace needs a value" ;;
      --) shift; break ;;
      *) usage "run: unknown argument '$1' (the command goes after --)" ;;
    esac
  done
  [ $# -ge 1 ] || usage "run needs a command after --"
  positive_int --grace "$grace"
  load_state
  local -a use=()
  if [ -n "$only" ]; then
    local h
    [[ "$only" =~ ^[0-9]+(,[0-9]+)*$ ]] || usage "--hosts '$only': a comma-separated list of host numbers, like 1,2"
    for h in ${only//,/ }; do
      [[ "$h" =~ ^[1-9][0-9]*$ ]] && [ "$h" -le "$hosts" ] || usage "--hosts '$only': host '$h' is not one of 1…$hosts"
      # A host given twice would get two sets of slots, and Open MPI ends in an internal error.
      [[ " ${use[*]} " != *" $h "* ]] || usage "--hosts '$only': host $h is given twice"
      use+=("$h")
    done
  else
    mapfile -t use < <(seq 1 "$hosts")
  fi
  local hostfile="$state/hostfile.run" h
  # A host whose link is cut cannot start its ranks, and mpirun would wait for it without a
  # word: named before the launch.
  for h in "${use[@]}"; do
    [ "$(link_state "$h")" != down ] ||
      die "host $h ($subnet.$h) is cut (its link is down): restore it (cluster.sh restore $h) or leave it out with --hosts"
  done
  : >"$hostfile"
  for h in "${use[@]}"; do echo "$subnet.$h slots=$ranks_per_host" >>"$hostfile"; done
  rm -f "$state/marks/"*
  local np=$((${#use[@]} * ranks_per_host))
  # Root, oversubscription, one BLAS thread per rank (scripts/mpi_env.sh).
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1
  export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
  mpirun --hostfile "$hostfile" -np "$np" --map-by slot \
    --mca plm_rsh_agent "$state/agent" --mca plm_rsh_no_tree_spawn 1 \
    --mca btl self,vader,tcp --mca btl_tcp_if_include "$subnet.0/24" \
    --mca oob_tcp_if_include "$subnet.0/24" \
    -x OPENBLAS_NUM_THREADS ${MESHTP_BLAS_THREADS:+-x MESHTP_BLAS_THREADS} \
    "$state/rank" "$@" &
  local job=$!
  trap 'kill -TERM $job 2>/dev/null' TERM INT
  local failed_at="" rank rc cut_at="" cut_host=""
  while kill -0 "$job" 2>/dev/null; do
    if [ -z "$failed_at" ] && compgen -G "$state/marks/*" >/dev/null; then
      failed_at=$SECONDS
    fi
    # A host cut as the job starts, before any of its ranks runs: mpirun would wait for it
    # without a word. When it still has no process --grace seconds later, the job is ended
    # naming it. (A host cut after its ranks started is the ranks' watchdog's to name.)
    if [ -z "$cut_at" ]; then
      for h in "${use[@]}"; do
        if [ "$(link_state "$h")" = down ] && [ -z "$(host_pids "$h")" ]; then
          cut_at=$SECONDS cut_host=$h
          break
        fi
      done
    elif [ -n "$(host_pids "$cut_host")" ]; then
      cut_at="" cut_host=""
    elif [ $((SECONDS - cut_at)) -ge "$grace" ] && [ -z "$failed_at" ]; then
      echo "cluster.sh: host $cut_host ($subnet.$cut_host) is cut (its link is down) and none of its ranks started ${grace} s later: ending the job" >&2
      kill -KILL "$job" 2>/dev/null
      # shellcheck disable=SC2046
      kill -KILL $(host_pids "${use[@]}") 2>/dev/null
      wait "$job" 2>/dev/null
      trap - TERM INT
      return 1
    fi
    if [ -n "$failed_at" ] && [ $((SECONDS - failed_at)) -ge "$grace" ]; then
      rank=$(ls -tr "$state/marks" | head -1)
      rc=$(cat "$state/marks/$rank")
      echo "cluster.sh: rank $rank exited with status $rc and mpirun has not ended ${grace} s later (a host it cannot reach?): ending the job" >&2
      # SIGKILL: a SIGTERM only makes mpirun wait for the abort already under way.
      kill -KILL "$job" 2>/dev/null
      # shellcheck disable=SC2046
      kill -KILL $(host_pids "${use[@]}") 2>/dev/null
      wait "$job" 2>/dev/null
      trap - TERM INT
      return "$rc"
    fi
    sleep 0.2
  done
  wait "$job"
  rc=$?
  # A signal to run (trap) interrupts the first wait; wait again for mpirun's own status.
  while kill -0 "$job" 2>/dev/null; do wait "$job"; rc=$?; done
  trap - TERM INT
  # Nothing of the job outlives it, whatever mpirun managed to clean up.
  # shellcheck disable=SC2046
  kill -KILL $(host_pids "${use[@]}") 2>/dev/null
  return "$rc"
}

cmd_link() {  # cmd_link up|down HOST
  [ $# -eq 2 ] || usage "$command needs one host number"
  load_state
  [[ "$2" =~ ^[1-9][0-9]*$ ]] && [ "$2" -le "$hosts" ] || usage "$command: host '$2' is not one of 1…$hosts"
  ip link set "$(veth_of "$2")" "$1" || die "could not set host $2's link $1"
  echo "host $2 ($subnet.$2): link $1"
}

cmd_show() {
  load_state
  echo "cluster '$name': $hosts hosts × $ranks_per_host ranks, links ${link_mbit} Mbit/s, subnet $subnet.0/24"
  local i
  for i in $(seq 1 "$hosts"); do
    echo "host $i: namespace $(ns_of "$i"), address $subnet.$i, link $(cat /sys/class/net/"$(veth_of "$i")"/operstate 2>/dev/null)"
  done
  echo "hostfile $state/hostfile, agent $state/agent"
}

case "$command" in
  up) cmd_up "$@" ;;
  run) cmd_run "$@" ;;
  cut) cmd_link down "$@" ;;
  restore) cmd_link up "$@" ;;
  down) [ $# -eq 0 ] || usage "down takes no arguments"; cmd_down ;;
  show) [ $# -eq 0 ] || usage "show takes no arguments"; cmd_show ;;
  *) usage "unknown command '$command'" ;;
esac
