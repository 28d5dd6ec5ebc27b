// The watched wait and the query side channel; the protocol is described in watchdog.hpp.
#include "comm/watchdog.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "comm/mpi_impl.hpp"

namespace meshtp::comm {

namespace detail {
double comm_timeout_s = 0.0;
}  // namespace detail

namespace {

constexpr int kQueryTag = 1;
constexpr int kAnswerTag = 2;
constexpr double kServeInterval = 0.01;  // s between checks for queries while waiting

// "How far are you on group `group`?" — sent by a rank whose wait timed out.
struct Query {
  std::uint64_t group = 0;
  std::int64_t seq = 0;
  std::uint32_t nonce = 0;
  std::int32_t unused = 0;
};

// The answer: how many collectives the rank has started on that group, and what it is
// waiting on right now (if anything).
struct Answer {
  std::uint32_t nonce = 0;
  std::int32_t member = 0;   // 1 if the rank belongs to the group asked about
  std::int64_t started = 0;  // collectives it has started on that group
  std::int32_t waiting = 0;  // 1 if it is inside a watched wait
  std::int32_t gave_up = 0;  // 1: the wait described is the one it abandoned (timed out)
  std::int32_t peer_world = -1;
  std::int64_t wait_seq = 0;
  double waited_s = 0.0;
  char op[24] = {};
  char where[88] = {};
};

MPI_Comm g_watch = MPI_COMM_NULL;
bool g_failed = false;
std::uint32_t g_nonce = 0;
std::map<std::uint64_t, MpiGroup*> g_groups;
std::map<std::vector<int>, std::uint64_t> g_made;  // groups made per member list
std::vector<std::string> g_hosts;  // each world rank's host (MPI_Get_processor_name)
std::deque<Query> g_sent_queries;                  // buffers of non-blocking sends

struct CurrentWait {
  const WaitSite* site = nullptr;
  double since = 0.0;
};
CurrentWait g_current;

// The wait this rank timed out in, kept until one of its later waits completes. A rank that
// gave up moves on (to the error path's next barrier, say) while its peers, timing out at the
// same moment, may still be asking where it waits: the abandoned wait is the answer that
// explains the deadlock, not wherever the rank went afterwards.
std::optional<Answer> g_abandoned;

// Sets what this rank is waiting on for the duration of a watched wait.
class WaitingOn {
 public:
  WaitingOn(const WaitSite& site, double since) { g_current = {&site, since}; }
  ~WaitingOn() { g_current = {}; }
  WaitingOn(const WaitingOn&) = delete;
  WaitingOn& operator=(const WaitingOn&) = delete;
};

std::uint64_t mix(std::uint64_t h, std::uint64_t v) {  // FNV-1a over 64-bit words
  return (h ^ v) * 0x100000001b3ull;
}

void copy_text(char* dst, std::size_t size, std::string_view text) {
  const std::size_t n = std::min(size - 1, text.size());
  std::memcpy(dst, text.data(), n);
  dst[n] = '\0';
}

int world_rank_of(const WaitSite& site, int group_rank) {
  return site.comm->world_ranks.at(static_cast<std::size_t>(group_rank));
}

// "0-3", or "0,2,5" (at most 16 listed).
std::string rank_list(const std::vector<int>& ranks) {
  bool consecutive = ranks.size() > 2;
  for (std::size_t i = 1; i < ranks.size(); ++i) consecutive &= ranks[i] == ranks[i - 1] + 1;
  if (consecutive) return fmt::format("{}-{}", ranks.front(), ranks.back());
  std::string out;
  for (std::size_t i = 0; i < ranks.size() && i < 16; ++i) {
    if (i) out += ',';
    out += std::to_string(ranks[i]);
  }
  if (ranks.size() > 16) out += fmt::format(",… ({} ranks)", ranks.size());
  return out;
}

std::string describe_site(const WaitSite& site) {
  const std::string group =
      fmt::format("{} (world ranks {})", site.comm->label, rank_list(site.comm->world_ranks));
  if (site.peer >= 0) {
    return fmt::format("{} with world rank {} on {}", site.op, world_rank_of(site, site.peer),
                       group);
  }
  return fmt::format("{} #{} on {}", site.op, site.seq, group);
}

// What a rank waiting at `site` for `waited_s` says about it (the wait fields of an Answer).
Answer wait_answer(const WaitSite& site, double waited_s) {
  Answer a;
  a.waiting = 1;
  a.wait_seq = site.seq;
  a.peer_world = site.peer >= 0 ? world_rank_of(site, site.peer) : -1;
  a.waited_s = waited_s;
  copy_text(a.op, sizeof a.op, site.op);
  copy_text(a.where, sizeof a.where, site.comm->label);
  return a;
}

// Copies the wait fields of `from` into `to` (its nonce and group progress stay).
void describe_wait(const Answer& from, Answer& to) {
  to.waiting = from.waiting;
  to.gave_up = from.gave_up;
  to.wait_seq = from.wait_seq;
  to.peer_world = from.peer_world;
  to.waited_s = from.waited_s;
  std::memcpy(to.op, from.op, sizeof to.op);
  std::memcpy(to.where, from.where, sizeof to.where);
}

// Answers every query that has arrived (from ranks whose own wait timed out).
void serve_queries() {
  if (g_watch == MPI_COMM_NULL) return;
  for (;;) {
    int flag = 0;
    MPI_Status status;
    if (MPI_Iprobe(MPI_ANY_SOURCE, kQueryTag, g_watch, &flag, &status) != MPI_SUCCESS || !flag) {
      return;
    }
    Query query;
    if (MPI_Recv(&query, sizeof query, MPI_BYTE, status.MPI_SOURCE, kQueryTag, g_watch,
                 MPI_STATUS_IGNORE) != MPI_SUCCESS) {
      return;
    }
    Answer answer;
    answer.nonce = query.nonce;
    if (const auto it = g_groups.find(query.group); it != g_groups.end()) {
      answer.member = 1;
      answer.started = it->second->started;
    }
    if (g_abandoned) {
      describe_wait(*g_abandoned, answer);
    } else if (g_current.site != nullptr) {
      describe_wait(wait_answer(*g_current.site, now_seconds() - g_current.since), answer);
    }
    // Tiny, so sent eagerly: this returns without waiting for the asker.
    (void)MPI_Send(&answer, sizeof answer, MPI_BYTE, status.MPI_SOURCE, kAnswerTag, g_watch);
  }
}

// Takes every answer that has arrived; keeps those to `nonce` (older ones are stale).
void collect_answers(std::uint32_t nonce, std::map<int, Answer>& answers) {
  for (;;) {
    int flag = 0;
    MPI_Status status;
    if (MPI_Iprobe(MPI_ANY_SOURCE, kAnswerTag, g_watch, &flag, &status) != MPI_SUCCESS || !flag) {
      return;
    }
    Answer answer;
    if (MPI_Recv(&answer, sizeof answer, MPI_BYTE, status.MPI_SOURCE, kAnswerTag, g_watch,
                 MPI_STATUS_IGNORE) != MPI_SUCCESS) {
      return;
    }
    if (answer.nonce == nonce) answers[status.MPI_SOURCE] = answer;
  }
}

std::string describe_answer(const Answer* a) {
  if (a == nullptr) return "no answer: stopped, dead, or busy outside communication";
  if (!a->waiting) return "answered from outside communication (computing)";
  const std::string what = a->peer_world >= 0
                               ? fmt::format("{} with world rank {}", a->op, a->peer_world)
                               : fmt::format("{} #{}", a->op, a->wait_seq);
  if (a->gave_up) {
    return fmt::format("gave up waiting in {} on {} after {:.1f} s", what, a->where, a->waited_s);
  }
  return fmt::format("waiting in {} on {} for {:.1f} s", what, a->where, a->waited_s);
}

// A collective's member arrived once it started the same operation on the group; a
// transfer's peer, once it waits on a transfer with this rank.
bool arrived(const WaitSite& site, const Answer* a) {
  if (a == nullptr) return false;
  if (site.peer >= 0) return a->waiting && a->peer_world == world_rank_of(site, site.comm->rank);
  return a->member && a->started >= site.seq;
}

// "; on host h2 (world ranks 2,3)": where the ranks that did not arrive run, when the job
// spans more than one host (a dead node or a cut link shows as one host's ranks).
std::string hosts_of(const std::vector<int>& ranks) {
  if (g_hosts.empty() ||
      std::all_of(g_hosts.begin(), g_hosts.end(), [](const auto& h) { return h == g_hosts[0]; })) {
    return "";
  }
  std::map<std::string, std::vector<int>> by_host;
  for (const int w : ranks) by_host[g_hosts.at(static_cast<std::size_t>(w))].push_back(w);
  std::string out = fmt::format("; on host{} ", by_host.size() > 1 ? "s" : "");
  bool first = true;
  for (const auto& [host, on] : by_host) {
    out += fmt::format("{}{} (world rank{} {})", first ? "" : ", ", host, on.size() > 1 ? "s" : "",
                       rank_list(on));
    first = false;
  }
  return out;
}

// The error once the deadline has passed and the grace period brought no completion.
std::string verdict(const WaitSite& site, const std::vector<int>& asked,
                    const std::map<int, Answer>& answers, double waited) {
  std::string message = fmt::format("{} did not complete within {:g} s (--comm-timeout; waited "
                                    "{:.1f} s): ",
                                    describe_site(site), detail::comm_timeout_s, waited);
  std::vector<int> missing;
  std::vector<std::string> details;
  for (const int w : asked) {
    const auto it = answers.find(w);
    const Answer* a = it == answers.end() ? nullptr : &it->second;
    if (!arrived(site, a)) {
      missing.push_back(w);
      details.push_back(fmt::format("{}{}", asked.size() > 1 ? fmt::format("{}: ", w) : "",
                                    describe_answer(a)));
    }
  }
  if (missing.empty()) {
    return message + "every rank arrived, but the transfer did not complete (a network fault?)";
  }
  message += fmt::format("world rank{} {} did not arrive (", missing.size() > 1 ? "s" : "",
                         rank_list(missing));
  for (std::size_t i = 0; i < details.size() && i < 8; ++i) {
    if (i) message += "; ";
    message += details[i];
  }
  return message + ")" + hosts_of(missing);
}

int first_error(int rc, std::span<MPI_Status> statuses) {
  if (rc != MPI_ERR_IN_STATUS) return rc;
  for (const MPI_Status& s : statuses) {
    if (s.MPI_ERROR != MPI_SUCCESS) return s.MPI_ERROR;
  }
  return rc;
}

}  // namespace

void set_comm_timeout(double seconds) {
  MESHTP_CHECK(std::isfinite(seconds) && seconds >= 0,
               "--comm-timeout={} must be a finite number of seconds ≥ 0 (0: no watchdog)",
               seconds);
#ifdef MESHTP_COMM_WATCHDOG_OFF
  (void)seconds;
#else
  detail::comm_timeout_s = seconds;
#endif
}

double comm_timeout() { return detail::comm_timeout_s; }

bool watchdog_available() {
#ifdef MESHTP_COMM_WATCHDOG_OFF
  return false;
#else
  return true;
#endif
}

bool comm_failed() { return g_failed; }

void register_group(MpiGroup* group) {
  std::uint64_t id = 0xcbf29ce484222325ull;
  for (const int w : group->world_ranks) id = mix(id, static_cast<std::uint64_t>(w));
  group->id = mix(id, g_made[group->world_ranks]++);
  g_groups[group->id] = group;
}

void unregister_group(MpiGroup* group) {
  const auto it = g_groups.find(group->id);
  if (it != g_groups.end() && it->second == group) g_groups.erase(it);
}

void watchdog_init() {
  if (!watchdog_available() || g_watch != MPI_COMM_NULL) return;
  check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &g_watch), "MPI_Comm_dup", -1);
  // Every rank's host, for naming the hosts of ranks that do not arrive (64 bytes each).
  constexpr int kName = 64;
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int length = 0;
  check_mpi(MPI_Get_processor_name(name, &length), "MPI_Get_processor_name", -1);
  name[kName - 1] = '\0';
  int size = 0;
  MPI_Comm_size(g_watch, &size);
  std::vector<char> all(static_cast<std::size_t>(size) * kName);
  check_mpi(MPI_Allgather(name, kName, MPI_CHAR, all.data(), kName, MPI_CHAR, g_watch),
            "MPI_Allgather", -1);
  g_hosts.clear();
  for (int r = 0; r < size; ++r)
    g_hosts.emplace_back(all.data() + static_cast<std::size_t>(r) * kName);
}

void watchdog_finalize() {
  if (g_watch == MPI_COMM_NULL) return;
  // Queries sent to this rank that it never served would make MPI_Comm_free wait on some
  // implementations: only free the channel after a clean run.
  if (!g_failed) MPI_Comm_free(&g_watch);
  g_watch = MPI_COMM_NULL;
}

int wait_requests(std::span<MPI_Request> requests, std::span<MPI_Status> statuses,
                  const WaitSite& site) {
  const int n = static_cast<int>(requests.size());
  MPI_Status* st = statuses.empty() ? MPI_STATUSES_IGNORE : statuses.data();
  if (!watchdog_active()) return first_error(MPI_Waitall(n, requests.data(), st), statuses);
  int done = 0;
  int rc = MPI_Testall(n, requests.data(), &done, st);
  // The wait ended (completed or failed in MPI): an abandoned wait is history now.
  const auto finished = [&] {
    g_abandoned.reset();
    return first_error(rc, statuses);
  };
  if (rc != MPI_SUCCESS || done) return finished();

  const double start = now_seconds();
  const WaitingOn waiting(site, start);
  const double deadline = start + detail::comm_timeout_s;
  double next_serve = start + kServeInterval;
  for (;;) {
    rc = MPI_Testall(n, requests.data(), &done, st);
    if (rc != MPI_SUCCESS || done) return finished();
    const double now = now_seconds();
    if (now >= next_serve) {
      serve_queries();
      next_serve = now + kServeInterval;
    }
    if (now >= deadline) break;
  }

  // Deadline passed: ask the ranks this wait depends on where they are.
  std::vector<int> asked;
  if (site.peer >= 0) {
    asked.push_back(world_rank_of(site, site.peer));
  } else {
    for (int r = 0; r < site.comm->size; ++r) {
      if (r != site.comm->rank) asked.push_back(world_rank_of(site, r));
    }
  }
  int world_rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  const double grace = std::clamp(detail::comm_timeout_s / 4, 1.0, 10.0);
  std::map<int, Answer> answers;
  for (int round = 0;; ++round) {
    const std::uint32_t nonce = (++g_nonce << 12) ^ static_cast<std::uint32_t>(world_rank);
    g_sent_queries.push_back({site.comm->id, site.seq, nonce, 0});
    for (const int w : asked) {
      MPI_Request r = MPI_REQUEST_NULL;
      if (MPI_Isend(&g_sent_queries.back(), sizeof(Query), MPI_BYTE, w, kQueryTag, g_watch,
                    &r) == MPI_SUCCESS) {
        MPI_Request_free(&r);
      }
    }
    answers.clear();
    for (const double grace_end = now_seconds() + grace;
         answers.size() < asked.size() && now_seconds() < grace_end;) {
      rc = MPI_Testall(n, requests.data(), &done, st);
      if (rc != MPI_SUCCESS || done) return finished();  // only slow
      serve_queries();
      collect_answers(nonce, answers);
    }
    // If every missing rank is alive and waiting in turn, it will time out too and name
    // whom it waits for — closer to the cause (the stopped rank at the end of the chain).
    // Give it one more timeout before reporting this link of the chain (or a deadlock).
    bool chained = round == 0;
    int missing = 0;
    for (const int w : asked) {
      const auto it = answers.find(w);
      const Answer* a = it == answers.end() ? nullptr : &it->second;
      if (arrived(site, a)) continue;
      ++missing;
      chained &= a != nullptr && a->waiting && !a->gave_up;  // gave up: the chain ends there
    }
    if (!chained || missing == 0) break;
    for (const double until = now_seconds() + detail::comm_timeout_s; now_seconds() < until;) {
      rc = MPI_Testall(n, requests.data(), &done, st);
      if (rc != MPI_SUCCESS || done) return finished();
      serve_queries();
    }
  }
  rc = MPI_Testall(n, requests.data(), &done, st);
  if (rc != MPI_SUCCESS || done) return finished();
  g_failed = true;
  g_abandoned = wait_answer(site, now_seconds() - start);
  g_abandoned->gave_up = 1;
  fail("{}", verdict(site, asked, answers, now_seconds() - start));
}

}  // namespace meshtp::comm
