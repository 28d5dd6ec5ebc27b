#include "plan/nccl_tests.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <utility>

#include "core/error.hpp"
#include "core/parse.hpp"
#include "core/text.hpp"

namespace meshtp::plan {
namespace {

// Where a line is, for messages: "'ar.log' line 12".
std::string at(const std::string& source, int line) {
  return fmt::format("'{}' line {}", source, line);
}

// At most 80 characters of a line, for messages.
std::string excerpt(std::string_view line) {
  return line.size() <= 80 ? std::string(line) : std::string(line.substr(0, 77)) + "...";
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

std::optional<std::int64_t> to_int(std::string_view t) {
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc() || end != t.data() + t.size()) return std::nullopt;
  return v;
}

std::optional<double> to_number(std::string_view t) {
  double v = 0;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc() || end != t.data() + t.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

// Drops what a launcher puts before each line: `[1,0]<stdout>:` (Open MPI --tag-output),
// `[0]` (some launchers), `0: ` (srun -l).
std::string_view strip_launcher_prefix(std::string_view line) {
  if (!line.empty() && line.front() == '[') {
    const std::size_t close = line.find(']');
    if (close != std::string_view::npos && close > 1 &&
        line.substr(1, close - 1).find_first_not_of("0123456789,") == std::string_view::npos) {
      line.remove_prefix(close + 1);
      for (std::string_view tag : {"<stdout>:", "<stderr>:"}) {
        if (line.substr(0, tag.size()) == tag) line.remove_prefix(tag.size());
      }
      return line;
    }
  }
  const std::string_view t = trim(line);
  const std::size_t colon = t.find(':');
  if (colon != std::string_view::npos && colon > 0 &&
      t.substr(0, colon).find_first_not_of("0123456789") == std::string_view::npos &&
      (colon + 1 == t.size() || t[colon + 1] == ' ' || t[colon + 1] == '\t')) {
    return t.substr(colon + 1);
  }
  return line;
}

// Bytes per element of nccl-tests' type names (src/common.cu test_typenames); 0 if unknown.
int element_bytes(std::string_view type) {
  static const std::map<std::string_view, int> kBytes{
      {"int8", 1},   {"uint8", 1},    {"char", 1},   {"int32", 4}, {"uint32", 4},
      {"int", 4},    {"int64", 8},    {"uint64", 8}, {"half", 2},  {"float", 4},
      {"double", 8}, {"bfloat16", 2}, {"f8e4m3", 1}, {"f8e5m2", 1}};
  const auto it = kBytes.find(type);
  return it == kBytes.end() ? 0 : it->second;
}

// The collective a program or file name names, if any.
std::optional<CollectiveKind> collective_named(std::string_view name) {
  const std::pair<std::string_view, CollectiveKind> kNames[] = {
      {"all_reduce", CollectiveKind::kAllReduce},
      {"allreduce", CollectiveKind::kAllReduce},
      {"all_gather", CollectiveKind::kAllGather},
      {"allgather", CollectiveKind::kAllGather},
      {"reduce_scatter", CollectiveKind::kReduceScatter},
      {"reducescatter", CollectiveKind::kReduceScatter},
      {"sendrecv", CollectiveKind::kSendRecv},
      {"send_recv", CollectiveKind::kSendRecv}};
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const auto& [key, c] : kNames) {
    if (lower.find(key) != std::string::npos) return c;
  }
  return std::nullopt;
}

// The column header: where the out-of-place columns are.
struct Columns {
  int line = 0;
  std::vector<std::string> names;
  int time = -1;               // the out-of-place time; algbw, busbw, #wrong follow it
  bool wrong_is_count = true;  // "#wrong" (a count); "error" is a maximum deviation
  std::vector<int> wrong;      // every #wrong column: out-of-place and in-place
  int redop = -1;
  bool timestamp = false;  // a trailing timestamp: two more fields per row
  std::size_t row_fields() const { return names.size() + (timestamp ? 1 : 0); }
};

Columns parse_columns(const std::vector<std::string_view>& t, const std::string& where) {
  Columns c;
  for (std::string_view name : t) c.names.emplace_back(name);
  MESHTP_CHECK(t.size() >= 3 && t[1] == "count" && t[2] == "type",
               "{}: column header '{}' does not read 'size count type …' as nccl-tests print it",
               where, fmt::join(t, " "));
  for (std::size_t i = 3; i < t.size(); ++i) {
    if (t[i] == "redop" && c.time < 0) c.redop = static_cast<int>(i);
    if ((t[i] == "time" || t[i] == "cputime") && c.time < 0) c.time = static_cast<int>(i);
  }
  const auto k = static_cast<std::size_t>(c.time);
  MESHTP_CHECK(c.time >= 0 && k + 3 < t.size() && t[k + 1] == "algbw" && t[k + 2] == "busbw" &&
                   (t[k + 3] == "#wrong" || t[k + 3] == "error"),
               "{}: column header '{}' has no 'time algbw busbw #wrong' columns", where,
               fmt::join(t, " "));
  c.wrong_is_count = t[k + 3] == "#wrong";
  for (std::size_t i = k + 3; i < t.size(); ++i) {
    if (t[i] == "#wrong") c.wrong.push_back(static_cast<int>(i));
  }
  c.timestamp = t.back() == "timestamp";
  return c;
}

struct RankLine {
  int line = 0;
  std::string host;
  std::string gpu;  // what follows the PCI bus id ("[0x07] NVIDIA A100-SXM4-80GB"), or empty
};

// Everything read before the checks that need the whole log.
struct RawLog {
  std::map<int, RankLine> ranks;
  std::optional<Columns> columns;
  std::vector<NcclTestsRow> rows;
  std::vector<std::pair<std::string, int>> types, redops;  // (value, first line)
  int threads = 0, gpus = 0, header_line = 0;
};

void note_value(std::vector<std::pair<std::string, int>>& seen, std::string_view v, int line) {
  if (std::none_of(seen.begin(), seen.end(), [&](const auto& s) { return s.first == v; })) {
    seen.emplace_back(std::string(v), line);
  }
}

void read_rank_line(RawLog& log, const std::vector<std::string_view>& t, const std::string& where,
                    int line, std::string_view text) {
  const std::optional<std::int64_t> id = t.size() >= 2 ? to_int(t[1]) : std::nullopt;
  const auto on = std::find(t.begin(), t.end(), "on");
  MESHTP_CHECK(id && *id >= 0 && *id < (1 << 24) && on != t.end() && on + 1 != t.end(),
               "{}: '{}' is not a Rank line ('Rank N … on HOST device D …')", where, excerpt(text));
  const auto group = std::find(t.begin(), t.end(), "Group");
  if (group != t.end() && group + 1 != t.end()) {
    MESHTP_CHECK(*(group + 1) == "0",
                 "{}: rank {} is in communicator group {}: logs of split communicators are not "
                 "read (run without NCCL_TESTS_SPLIT / NCCL_TESTS_SPLIT_MASK)",
                 where, *id, *(group + 1));
  }
  const int rank = static_cast<int>(*id);
  // The host goes into messages and the topology's JSON: UTF-8 text only, before any work.
  check_name(fmt::format("{}: host", where), *(on + 1));
  // The GPU's name: the words after the "[0x07]" bus id (nccl-tests prints prop.name there).
  std::string gpu;
  const auto bus = std::find_if(on, t.end(), [](std::string_view w) {
    return w.size() > 3 && w.substr(0, 3) == "[0x" && w.back() == ']';
  });
  if (bus != t.end()) {
    for (auto w = bus + 1; w != t.end(); ++w) {
      if (!gpu.empty()) gpu.push_back(' ');
      gpu.append(w->data(), w->size());
    }
    check_name(fmt::format("{}: GPU name", where), gpu);
  }
  const auto [it, inserted] =
      log.ranks.emplace(rank, RankLine{line, std::string(*(on + 1)), std::move(gpu)});
  MESHTP_CHECK(inserted,
               "{}: rank {} is listed twice (first on line {}): each process ran as a world of "
               "its own — was nccl-tests built with MPI=1?",
               where, rank, it->second.line);
}

void read_row(RawLog& log, const std::vector<std::string_view>& t, const std::string& where,
              int line, std::string_view text) {
  MESHTP_CHECK(log.columns, "{}: '{}' comes before the column header ('#  size  count  type …')",
               where, excerpt(text));
  const Columns& c = *log.columns;
  MESHTP_CHECK(t.size() == c.row_fields(),
               "{}: '{}' has {} fields, but the column header on line {} has {}", where,
               excerpt(text), t.size(), c.line, c.row_fields());
  const std::optional<std::int64_t> size = to_int(t[0]), count = to_int(t[1]);
  MESHTP_CHECK(size && *size >= 0, "{}: size '{}' is not a byte count", where, t[0]);
  MESHTP_CHECK(count && *count >= 0, "{}: count '{}' is not an element count", where, t[1]);
  MESHTP_CHECK(!to_number(t[2]), "{}: type '{}' is a number, not a type name", where, t[2]);
  const auto k = static_cast<std::size_t>(c.time);
  const std::optional<double> time = to_number(t[k]), algbw = to_number(t[k + 1]),
                              busbw = to_number(t[k + 2]);
  MESHTP_CHECK(time && *time >= 0, "{}: time '{}' is not a number of microseconds", where, t[k]);
  MESHTP_CHECK(algbw && *algbw >= 0, "{}: algbw '{}' is not a bandwidth", where, t[k + 1]);
  MESHTP_CHECK(busbw && *busbw >= 0, "{}: busbw '{}' is not a bandwidth", where, t[k + 2]);
  // Every #wrong column, the in-place run's too: a wrong result is a broken collective.
  for (const int column : c.wrong) {
    const std::string_view w = t[static_cast<std::size_t>(column)];
    if (w == "N/A") continue;
    const std::optional<double> wrong = to_number(w);
    MESHTP_CHECK(wrong, "{}: #wrong '{}' is not a count", where, w);
    MESHTP_CHECK(*wrong == 0,
                 "{}: #wrong is {} at {} bytes: the collective returned wrong values, so this "
                 "log does not time a working collective",
                 where, w, *size);
  }
  note_value(log.types, t[2], line);
  if (c.redop >= 0) note_value(log.redops, t[static_cast<std::size_t>(c.redop)], line);
  if (*size == 0) return;  // -b 0: nothing moves
  // nccl-tests prints times to 0.01 µs; a step beyond 10^10 µs (about 3 hours) is no timing.
  MESHTP_CHECK(*time >= 0.01 && *time <= 1e10,
               "{}: time {} us for {} bytes is outside what nccl-tests prints (0.01 to 1e10 us)",
               where, t[k], *size);
  for (const NcclTestsRow& seen : log.rows) {
    MESHTP_CHECK(seen.bytes != *size,
                 "{}: size {} again (first on line {}): one run per log — split the file, or "
                 "give the run you mean",
                 where, *size, seen.line);
  }
  log.rows.push_back({.line = line,
                      .bytes = *size,
                      .count = *count,
                      .time_us = *time,
                      .algbw_gbps = *algbw,
                      .busbw_gbps = *busbw});
}

// The checks of the header comment that need the whole log: ranks, hosts, type, sizes, busbw.
void check_log(NcclTestsLog& out, const RawLog& raw) {
  const std::string& src = out.source;
  out.ranks = static_cast<int>(raw.ranks.size());
  MESHTP_CHECK(raw.ranks.rbegin()->first == out.ranks - 1,
               "'{}' lists {} ranks, but rank {} (line {}) is among them: ranks 0…{} expected", src,
               out.ranks, raw.ranks.rbegin()->first, raw.ranks.rbegin()->second.line,
               out.ranks - 1);
  if (raw.threads > 0 && raw.gpus > 0) {
    MESHTP_CHECK(out.ranks % (raw.threads * raw.gpus) == 0,
                 "{}: {} Rank lines, but nThread {} × nGpus {} per process does not divide them",
                 at(src, raw.header_line), out.ranks, raw.threads, raw.gpus);
  }
  std::map<std::string, int> per_host;
  for (const auto& [rank, r] : raw.ranks) {
    if (per_host[r.host]++ == 0) out.hosts.push_back(r.host);
  }
  out.ranks_per_host = per_host[out.hosts.front()];
  for (const auto& [rank, r] : raw.ranks) {
    if (!r.gpu.empty() && std::find(out.gpus.begin(), out.gpus.end(), r.gpu) == out.gpus.end()) {
      out.gpus.push_back(r.gpu);
    }
  }
  for (const std::string& h : out.hosts) {
    MESHTP_CHECK(per_host[h] == out.ranks_per_host,
                 "'{}': host '{}' has {} ranks but '{}' has {}: every host must run as many", src,
                 h, per_host[h], out.hosts.front(), out.ranks_per_host);
  }
  MESHTP_CHECK(!raw.rows.empty(), "'{}' has no result rows of a size above 0", src);
  MESHTP_CHECK(raw.types.size() == 1,
               "{}: rows of type '{}' after rows of type '{}': give a log of one type (-d)",
               at(src, raw.types.back().second), raw.types.back().first, raw.types.front().first);
  out.type = raw.types.front().first;
  if (!raw.redops.empty()) {
    MESHTP_CHECK(raw.redops.size() == 1,
                 "{}: rows of op '{}' after rows of op '{}': give a log of one op (-o)",
                 at(src, raw.redops.back().second), raw.redops.back().first,
                 raw.redops.front().first);
    out.redop = raw.redops.front().first;
  }
  const int p = out.ranks;
  const CollectiveKind c = out.collective;
  const bool gathered = c == CollectiveKind::kAllGather || c == CollectiveKind::kReduceScatter;
  const int e = element_bytes(out.type);
  const double f = bus_factor(c, p);
  MESHTP_CHECK(f > 0, "'{}' has 1 rank: there is no communication to fit", src);
  for (const NcclTestsRow& r : raw.rows) {
    const std::string where = at(src, r.line);
    if (e > 0) {
      const std::int64_t factor = static_cast<std::int64_t>(e) * (gathered ? p : 1);
      MESHTP_CHECK(r.count <= std::numeric_limits<std::int64_t>::max() / factor,
                   "{}: count {} × {} bytes{} is more bytes than any log can move", where,
                   r.count, e, gathered ? fmt::format(" × {} ranks", p) : std::string());
      const std::int64_t want = r.count * factor;
      MESHTP_CHECK(r.bytes == want,
                   "{}: size {} is not count {} × {} bytes ({}){}, as {} on {} ranks prints it: "
                   "is the log of another collective or rank count?",
                   where, r.bytes, r.count, e, out.type,
                   gathered ? fmt::format(" × {} ranks", p) : std::string(), name(c), p);
    }
    if (r.busbw_gbps >= 1) {
      const double expected = static_cast<double>(r.bytes) / (r.time_us * 1e-6) / kGB * f;
      MESHTP_CHECK(std::abs(expected / r.busbw_gbps - 1) <= 0.02,
                   "{}: busbw {} GB/s, but size/time × {:.4g} ({} on {} ranks) is {:.4g}: is the "
                   "log of another collective or rank count?",
                   where, r.busbw_gbps, f, name(c), p, expected);
    }
  }
  out.rows = raw.rows;
}

}  // namespace

NcclTestsLog parse_nccl_tests(std::string_view text, const std::string& source) {
  NcclTestsLog out;
  out.source = source;
  RawLog raw;
  bool started = false;  // a line of nccl-tests' header seen
  int number = 0;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view full = text.substr(pos, end - pos);
    pos = end + 1;
    ++number;
    // A log collector may indent every line, launcher tag and all.
    const std::string_view line = trim(strip_launcher_prefix(trim(full)));
    if (line.empty()) continue;
    if (line.find("NCCL INFO") != std::string_view::npos ||
        line.find("NCCL WARN") != std::string_view::npos ||
        line.rfind("NCCL version", 0) == 0) {
      continue;  // NCCL_DEBUG output (NCCL_DEBUG=VERSION: a bare "NCCL version 2.20.5+cuda12.4")
    }
    const std::string where = at(source, number);
    if (line.front() == '#') {
      const std::string_view body = trim(line.substr(1));
      const std::vector<std::string_view> t = split_words(body);
      if (t.empty()) continue;
      if (t[0] == "nThread") {
        started = true;
        raw.header_line = number;
        const auto threads = t.size() >= 4 ? to_int(t[1]) : std::nullopt;
        const auto gpus = t.size() >= 4 && t[2] == "nGpus" ? to_int(t[3]) : std::nullopt;
        MESHTP_CHECK(
            threads && gpus && *threads >= 1 && *gpus >= 1 && *threads < 4096 && *gpus < 4096,
            "{}: '{}' does not read 'nThread T nGpus G …'", where, excerpt(line));
        raw.threads = static_cast<int>(*threads);
        raw.gpus = static_cast<int>(*gpus);
      } else if (t[0] == "Rank") {
        started = true;
        read_rank_line(raw, t, where, number, line);
      } else if (body.rfind("Collective test starting:", 0) == 0) {
        started = true;
        out.program =
            std::string(trim(body.substr(std::string_view("Collective test starting:").size())));
      } else if (t[0] == "size") {
        started = true;
        Columns c = parse_columns(t, where);
        c.line = number;
        if (raw.columns) {
          MESHTP_CHECK(raw.columns->names == c.names,
                       "{}: a second column header, unlike the one on line {}", where,
                       raw.columns->line);
        } else {
          raw.columns = std::move(c);
        }
      } else if (t[0] == "bytes" && t.size() > 1 && t[1] == "N") {
        fail(
            "{}: column header '{}' is nccl-tests' 2017 format; meshtp reads the format of "
            "nccl-tests 2.0 (2019) and later",
            where, excerpt(body));
      } else if (body.rfind("Out of bounds values", 0) == 0) {
        // nccl-tests' verdict on the whole run: "… : 0 OK", or "… : N FAILED".
        MESHTP_CHECK(t.back() != "FAILED",
                     "{}: nccl-tests reports '{}': the collective returned wrong values, so this "
                     "log does not time a working collective",
                     where, excerpt(body));
      } else if (t[0] == "(B)") {
        MESHTP_CHECK(std::find(t.begin(), t.end(), "(us)") != t.end(),
                     "{}: the units line '{}' gives no time in (us)", where, excerpt(body));
      }
      continue;  // every other '#' line is a comment
    }
    if (!started) continue;  // before nccl-tests' header: a prompt, a scheduler's banner
    const std::vector<std::string_view> t = split_words(line);
    MESHTP_CHECK(to_int(t[0]),
                 "{}: '{}' is neither a '#' line nor a result row (size count type …)", where,
                 excerpt(line));
    read_row(raw, t, where, number, line);
  }

  MESHTP_CHECK(!raw.ranks.empty(),
               "'{}' has no '#  Rank N … on HOST …' line: is it the output of an nccl-tests "
               "program (all_reduce_perf, …)?",
               source);
  if (!out.program.empty()) {
    const std::optional<CollectiveKind> c = collective_named(out.program);
    MESHTP_CHECK(c,
                 "'{}' is the output of {}: meshtp fits all_reduce_perf, all_gather_perf, "
                 "reduce_scatter_perf and sendrecv_perf",
                 source, out.program);
    out.collective = *c;
  } else {
    // The file's own name, not its folders' ("runs/all_gather/ar.log" is no all_gather).
    const std::optional<CollectiveKind> c =
        collective_named(std::filesystem::path(source).filename().string());
    MESHTP_CHECK(c,
                 "'{}' does not say which collective it times (no '# Collective test starting:' "
                 "line, and its file name names none of all_reduce, all_gather, reduce_scatter, "
                 "sendrecv): name the file after the program, e.g. all_reduce_perf.log",
                 source);
    out.collective = *c;
  }
  check_log(out, raw);
  return out;
}

}  // namespace meshtp::plan
