// The simulated build's device ↔ communication-engine protocol (smpi_glue.hpp explains why).
// Compiled only with MESHTP_SIMULATE. Every MPI call here is SMPI's own (PMPI_…), so none of
// the routing macros of smpi_glue.hpp apply inside this file.
#include "comm/smpi_glue.hpp"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "comm/smpi_device.hpp"

namespace meshtp::comm::smpi {
namespace {

enum class Kind : int {
  kShutdown,
  kSplit,
  kFree,
  kAllreduce,
  kAllgather,
  kReduceScatterBlock,
  kBcast,
  kReduce,
  kAlltoall,
  kAlltoallv,
  kBarrier,
};

// One command, device → engine (plain bytes: both live in the same address space).
struct Command {
  Kind kind = Kind::kShutdown;
  int comm = 0;    // the engine's id of the communicator
  int result = 0;  // kSplit: id of the new communicator
  int color = 0, key = 0;
  int count = 0, recv_count = 0, root = 0;
  MPI_Datatype type = MPI_DATATYPE_NULL, recv_type = MPI_DATATYPE_NULL;
  MPI_Op op = MPI_OP_NULL;
  const void* send = nullptr;
  void* recv = nullptr;
  // kAlltoallv: the device's count and displacement arrays (alive until the completion);
  // count and recv_count are then the totals.
  const int* send_counts = nullptr;
  const int* send_displs = nullptr;
  const int* recv_counts = nullptr;
  const int* recv_displs = nullptr;
  int done_tag = 0;  // the completion message's tag
};

constexpr int kCommandTag = 1;
constexpr int kFirstDoneTag = 16;
constexpr int kDoneTagSpan = 1 << 20;

struct Served {
  int id = 0;      // the engines' id of this communicator
  int stream = 0;  // the engine that runs its collectives
};

// One per simulated process (SMPI privatises globals per rank).
struct State {
  int streams = 1;
  int devices = 0;  // N
  int role = 0;     // 0: device; s + 1: engine of stream s
  int device = 0;   // the device this rank is or serves
  MPI_Comm control = MPI_COMM_NULL;  // duplicate of SMPI's world: commands, completions
  MPI_Comm world = MPI_COMM_NULL;    // the devices (or this stream's engines)
  std::map<MPI_Comm, Served> served;  // device side
  int next_id = 1;                    // id 0 is the world
  int created = 0;                    // communicators created, agreed with their members
  int next_tag = 0;
};

State& state() {
  static State s;
  return s;
}

int engine_rank(int stream) { return (stream + 1) * state().devices + state().device; }

const Served& served(MPI_Comm comm) {
  const auto it = state().served.find(comm);
  if (it == state().served.end()) die("a communicator unknown to the communication engines");
  return it->second;
}

void send_command(const Command& c, int stream) {
  PMPI_Send(&c, sizeof c, MPI_BYTE, engine_rank(stream), kCommandTag, state().control);
}

// Hands `c` to the engine serving `comm`; `request` completes when the engine is done.
int start(Command c, MPI_Comm comm, MPI_Request* request) {
  State& s = state();
  const Served& target = served(comm);
  c.comm = target.id;
  c.done_tag = kFirstDoneTag + s.next_tag;
  s.next_tag = (s.next_tag + 1) % kDoneTagSpan;
  // Post the completion's receive first, so the engine's message always has a match.
  PMPI_Irecv(nullptr, 0, MPI_BYTE, engine_rank(target.stream), c.done_tag, s.control, request);
  send_command(c, target.stream);
  return MPI_SUCCESS;
}

// ---- the engine ------------------------------------------------------------------------

int type_size(MPI_Datatype type) {
  int size = 0;
  if (type != MPI_DATATYPE_NULL) PMPI_Type_size(type, &size);
  return size;
}

int execute(const Command& command, const std::vector<MPI_Comm>& comms) {
  Command c = command;  // on the wire: the simulated model's precision (wire_type)
  // All-to-all-v keeps its type: wire_type decides on a message's size, and the ranks of one
  // all-to-all-v send totals of their own, so they could decide differently.
  if (c.kind != Kind::kAlltoallv) {
    c.type = wire_type(c.type, c.count);
    c.recv_type = wire_type(c.recv_type, c.recv_count);
  }
  const MPI_Comm comm = comms.at(static_cast<std::size_t>(c.comm));
  int size = 0;
  PMPI_Comm_size(comm, &size);
  const MPI_Op op = engine_op(c.op, c.type, c.count);
  const std::size_t elem = static_cast<std::size_t>(type_size(c.type));
  const std::size_t recv_elem = static_cast<std::size_t>(type_size(c.recv_type));
  const auto p = static_cast<std::size_t>(size);
  switch (c.kind) {
    case Kind::kAllreduce: {
      auto b = engine_buffers(c.send, c.recv, elem * c.count, elem * c.count);
      // Stand-ins (charged mode): one for both sides, so the ring's copies of its own blocks
      // (a send-receive to itself) have nothing to copy.
      if (b.recv != c.recv) b.send = b.recv;
      return PMPI_Allreduce(b.send, b.recv, c.count, c.type, op, comm);
    }
    case Kind::kAllgather: {
      const auto b = engine_buffers(c.send, c.recv, elem * c.count, recv_elem * c.recv_count * p);
      return PMPI_Allgather(b.send, c.count, c.type, b.recv, c.recv_count, c.recv_type, comm);
    }
    case Kind::kReduceScatterBlock: {
      // PMPI_Reduce_scatter with equal counts is the same algorithm (smpi/reduce_scatter);
      // SMPI's reduce_scatter_block entry point also zero-fills a trace vector of `count` ints.
      const auto b = engine_buffers(c.send, c.recv, elem * c.count * p, elem * c.count);
      const std::vector<int> counts(p, c.count);
      return PMPI_Reduce_scatter(b.send, b.recv, counts.data(), c.type, op, comm);
    }
    case Kind::kBcast: {
      const auto b = engine_buffers(nullptr, c.recv, 0, elem * c.count);
      return PMPI_Bcast(b.recv, c.count, c.type, c.root, comm);
    }
    case Kind::kReduce: {
      const std::size_t bytes = elem * c.count;
      if (size == 1) {  // SMPI's tree algorithms mis-handle a group of one: it is a copy
        if (c.recv != nullptr && c.send != MPI_IN_PLACE && c.send != c.recv) {
          copy_unless_meaningless(c.recv, c.send, bytes);
        }
        return MPI_SUCCESS;
      }
      // SMPI's pipelined reduce algorithms accumulate in recv on every rank of the chain, as
      // Open MPI's do when recv is given; meshtp passes none off the root: lend one.
      const Scratch scratch(c.recv == nullptr ? bytes : 0);
      const auto b = engine_buffers(c.send, c.recv != nullptr ? c.recv : scratch.data(), bytes,
                                    bytes);
      return PMPI_Reduce(b.send, b.recv, c.count, c.type, op, c.root, comm);
    }
    case Kind::kAlltoall: {
      const auto b = engine_buffers(c.send, c.recv, elem * c.count * p, recv_elem * c.recv_count * p);
      return PMPI_Alltoall(b.send, c.count, c.type, b.recv, c.recv_count, c.recv_type, comm);
    }
    case Kind::kAlltoallv: {
      const auto b = engine_buffers(c.send, c.recv, elem * c.count, recv_elem * c.recv_count);
      return PMPI_Alltoallv(b.send, c.send_counts, c.send_displs, c.type, b.recv, c.recv_counts,
                            c.recv_displs, c.recv_type, comm);
    }
    case Kind::kBarrier: return PMPI_Barrier(comm);
    default: die("unexpected engine command");
  }
}

void serve() {
  State& s = state();
  std::vector<MPI_Comm> comms{s.world};
  const int device = s.device;
  for (;;) {
    Command c;
    PMPI_Recv(&c, sizeof c, MPI_BYTE, device, kCommandTag, s.control, MPI_STATUS_IGNORE);
    switch (c.kind) {
      case Kind::kShutdown: return;
      case Kind::kSplit: {
        MPI_Comm out = MPI_COMM_NULL;
        PMPI_Comm_split(comms.at(static_cast<std::size_t>(c.comm)), c.color, c.key, &out);
        if (comms.size() <= static_cast<std::size_t>(c.result)) comms.resize(c.result + 1);
        comms[static_cast<std::size_t>(c.result)] = out;
        continue;
      }
      case Kind::kFree:
        PMPI_Comm_free(&comms.at(static_cast<std::size_t>(c.comm)));
        continue;
      default: break;
    }
    engine_launch();
    const int rc = execute(c, comms);
    if (rc != MPI_SUCCESS) die("a collective failed inside a communication engine");
    PMPI_Send(nullptr, 0, MPI_BYTE, device, c.done_tag, s.control);
  }
}

int streams_from_env() {
  const char* text = std::getenv("MESHTP_SIM_STREAMS");
  if (text == nullptr || *text == '\0') return 2;
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (*end != '\0' || v < 1 || v > 16) {
    die(std::string("MESHTP_SIM_STREAMS='") + text + "' is not a stream count in [1, 16]");
  }
  return static_cast<int>(v);
}

}  // namespace

MPI_Comm device_world() { return state().world; }

int init_thread(int* argc, char*** argv, int required, int* provided) {
  const int rc = PMPI_Init_thread(argc, argv, required, provided);
  if (rc != MPI_SUCCESS) return rc;
  State& s = state();
  int rank = 0, size = 0;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  PMPI_Comm_size(MPI_COMM_WORLD, &size);
  s.streams = streams_from_env();
  if (size % (s.streams + 1) != 0) {
    die("smpirun -np " + std::to_string(size) + " is not a multiple of " +
        std::to_string(s.streams + 1) + " (1 device + " + std::to_string(s.streams) +
        " communication streams, MESHTP_SIM_STREAMS): run N devices as -np N·" +
        std::to_string(s.streams + 1) + " — `meshtp simulate` does this for you");
  }
  s.devices = size / (s.streams + 1);
  s.role = rank / s.devices;
  s.device = rank % s.devices;
  PMPI_Comm_dup(MPI_COMM_WORLD, &s.control);
  PMPI_Comm_split(MPI_COMM_WORLD, s.role, s.device, &s.world);
  if (s.role == 0) {
    s.served[s.world] = Served{0, 0};
    install_device(s.world);
    return MPI_SUCCESS;
  }
  // An engine: serve its device until it finalises, then end this simulated process here
  // (smpi_exit ends the actor; the program's main never runs on an engine).
  install_engine();
  serve();
  PMPI_Finalize();
  smpi_exit(0);
}

int finalize() {
  State& s = state();
  for (int stream = 0; stream < s.streams; ++stream) send_command(Command{}, stream);
  return PMPI_Finalize();
}

int comm_split(MPI_Comm comm, int color, int key, MPI_Comm* out) {
  State& s = state();
  const Served parent = served(comm);
  const int rc = PMPI_Comm_split(comm, color, key, out);
  if (rc != MPI_SUCCESS || *out == MPI_COMM_NULL) return rc;
  // The members agree on the creation count (max over them), so they pick the same stream.
  int created = s.created + 1;
  PMPI_Allreduce(MPI_IN_PLACE, &created, 1, MPI_INT, MPI_MAX, *out);
  s.created = created;
  const Served child{s.next_id++, created % s.streams};
  Command c;
  c.kind = Kind::kSplit;
  c.comm = parent.id;
  c.result = child.id;
  c.color = color;
  c.key = key;
  // Every engine mirrors every communicator: a split is collective over the parent, whose
  // engines may be any stream's.
  for (int stream = 0; stream < s.streams; ++stream) send_command(c, stream);
  s.served[*out] = child;
  return rc;
}

int comm_free(MPI_Comm* comm) {
  State& s = state();
  const auto it = s.served.find(*comm);
  if (it != s.served.end()) {
    Command c;
    c.kind = Kind::kFree;
    c.comm = it->second.id;
    for (int stream = 0; stream < s.streams; ++stream) send_command(c, stream);
    s.served.erase(it);
  }
  return PMPI_Comm_free(comm);
}

namespace {

Command collective(Kind kind, const void* send, void* recv, int count, MPI_Datatype type,
                   MPI_Op op = MPI_OP_NULL, int root = 0) {
  Command c;
  c.kind = kind;
  c.send = send;
  c.recv = recv;
  c.count = count;
  c.type = type;
  c.op = op;
  c.root = root;
  return c;
}

Command gather_like(Kind kind, const void* send, int send_count, MPI_Datatype send_type,
                    void* recv, int recv_count, MPI_Datatype recv_type) {
  Command c = collective(kind, send, recv, send_count, send_type);
  c.recv_count = recv_count;
  c.recv_type = recv_type;
  return c;
}

}  // namespace

int iallreduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op,
               MPI_Comm comm, MPI_Request* request) {
  return start(collective(Kind::kAllreduce, send, recv, count, type, op), comm, request);
}
int iallgather(const void* send, int send_count, MPI_Datatype send_type, void* recv,
               int recv_count, MPI_Datatype recv_type, MPI_Comm comm, MPI_Request* request) {
  return start(gather_like(Kind::kAllgather, send, send_count, send_type, recv, recv_count,
                           recv_type),
               comm, request);
}
int ireduce_scatter_block(const void* send, void* recv, int count, MPI_Datatype type,
                          MPI_Op op, MPI_Comm comm, MPI_Request* request) {
  return start(collective(Kind::kReduceScatterBlock, send, recv, count, type, op), comm,
               request);
}
int ibcast(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm,
           MPI_Request* request) {
  return start(collective(Kind::kBcast, nullptr, buf, count, type, MPI_OP_NULL, root), comm,
               request);
}
int ireduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, int root,
            MPI_Comm comm, MPI_Request* request) {
  return start(collective(Kind::kReduce, send, recv, count, type, op, root), comm, request);
}
int ialltoall(const void* send, int send_count, MPI_Datatype send_type, void* recv,
              int recv_count, MPI_Datatype recv_type, MPI_Comm comm, MPI_Request* request) {
  return start(gather_like(Kind::kAlltoall, send, send_count, send_type, recv, recv_count,
                           recv_type),
               comm, request);
}
int ialltoallv(const void* send, const int* send_counts, const int* send_displs,
               MPI_Datatype send_type, void* recv, const int* recv_counts, const int* recv_displs,
               MPI_Datatype recv_type, MPI_Comm comm, MPI_Request* request) {
  int size = 0;
  PMPI_Comm_size(comm, &size);
  int send_total = 0, recv_total = 0;
  for (int r = 0; r < size; ++r) {
    send_total += send_counts[r];
    recv_total += recv_counts[r];
  }
  Command c = gather_like(Kind::kAlltoallv, send, send_total, send_type, recv, recv_total,
                          recv_type);
  c.send_counts = send_counts;
  c.send_displs = send_displs;
  c.recv_counts = recv_counts;
  c.recv_displs = recv_displs;
  return start(c, comm, request);
}
int ibarrier(MPI_Comm comm, MPI_Request* request) {
  return start(collective(Kind::kBarrier, nullptr, nullptr, 0, MPI_BYTE), comm, request);
}

}  // namespace meshtp::comm::smpi
