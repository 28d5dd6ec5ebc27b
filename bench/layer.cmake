# The layer benchmark driver (GPT block stack on a mesh). Included from bench/CMakeLists.txt.
target_sources(meshtp_bench PRIVATE layer.cpp)
target_link_libraries(meshtp_bench PUBLIC meshtp_model)
