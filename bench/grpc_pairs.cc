// grpc_pairs: BeginUpdate + CommitUpdate pairs per second and their latency,
// through claims-grpc (--mode grpc, stubs generated from grpc/proto) or as
// the same two calls in SQL through libpq (--mode sql), so that the two are
// measured by one program the same way.
//
//   grpc_pairs --mode grpc --target 127.0.0.1:PORT --certs DIR [--ident cell-one]
//   grpc_pairs --mode sql --conninfo 'host=... user=cell_one dbname=...'
//   common: --threads N --seconds S [--warmup S] [--rate PAIRS_PER_S]
//           [--cell ID] [--prefix P] [--deadline-ms MS]
//           [--gateway-pid PID] [--store-pid POSTMASTER_PID]
//
// Each thread has its own connection (a channel with a subchannel of its
// own, or a PGconn) and creates one fresh username per pair. Without
// --rate a thread starts the next pair as soon as the last one ended; with
// it, pairs are started on a fixed schedule (rate over all threads) and a
// pair's latency runs from its scheduled start, so a late pair counts its
// wait (such pairs may run past --seconds; pairs_per_s is over the whole
// time taken). Prints one line:
//   pairs=N seconds=S pairs_per_s=X p50_ms=X p99_ms=X client_cpu_us=X
//   [gateway_cpu_us=X] [store_cpu_us=X] errors=N [first_error=...]
// The *_cpu_us figures are CPU time (user + system) per measured pair over
// the measured part: this program's own (all its threads), the process
// --gateway-pid, and the store's backends (the children of --store-pid,
// alive or ended: an ended child's time is in the postmaster's cutime).
#include <grpcpp/grpcpp.h>
#include <libpq-fe.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <sys/resource.h>
#include <unistd.h>

#include "proto/claims/v1/service.grpc.pb.h"

namespace cv1 = gitlab::cells::topology_service::claims::v1;
using Clock = std::chrono::steady_clock;

struct Options {
  std::string mode, target, certs, ident = "cell-one", conninfo, prefix = "p";
  int threads = 1;
  double seconds = 10, warmup = 1, rate = 0;
  long cell = 1;
  int deadline_ms = 5000;
  long gateway_pid = 0, store_pid = 0;
};

// One client connection doing pairs.
class Pairer {
 public:
  virtual ~Pairer() = default;
  // One BeginUpdate + CommitUpdate of a fresh value; false and *err on failure.
  virtual bool Pair(const std::string& value, long id, std::string* err) = 0;
};

static std::string Slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

static std::string BigEndian8(long v) {
  std::string s(8, '\0');
  for (int i = 7; i >= 0; i--, v >>= 8) s[i] = static_cast<char>(v & 0xff);
  return s;
}

class GrpcPairer : public Pairer {
 public:
  GrpcPairer(const Options& o) : o_(o) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = Slurp(o.certs + "/ca.crt");
    ssl.pem_private_key = Slurp(o.certs + "/" + o.ident + ".key");
    ssl.pem_cert_chain = Slurp(o.certs + "/" + o.ident + ".crt");
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection per thread
    stub_ = cv1::ClaimService::NewStub(
        grpc::CreateCustomChannel(o.target, grpc::SslCredentials(ssl), args));
  }

  bool Pair(const std::string& value, long id, std::string* err) override {
    cv1::BeginUpdateRequest req;
    req.set_cell_id(o_.cell);
    cv1::Metadata* m = req.add_create_records();
    m->mutable_bucket()->set_type(cv1::Bucket::USERNAMES);
    m->mutable_bucket()->set_value(value);
    m->mutable_subject()->set_type(cv1::Subject::USER);
    m->mutable_subject()->set_id(id);
    m->mutable_source()->set_type(cv1::Source::RAILS_TABLE_USERS);
    m->mutable_source()->set_rails_primary_key_id(BigEndian8(id));
    cv1::BeginUpdateResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(o_.deadline_ms));
    grpc::Status st = stub_->BeginUpdate(&ctx, req, &resp);
    if (!st.ok()) return Fail("BeginUpdate", st, err);
    cv1::CommitUpdateRequest creq;
    creq.set_cell_id(o_.cell);
    *creq.mutable_lease_uuid() = resp.lease_uuid();
    cv1::CommitUpdateResponse cresp;
    grpc::ClientContext cctx;
    cctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(o_.deadline_ms));
    st = stub_->CommitUpdate(&cctx, creq, &cresp);
    if (!st.ok()) return Fail("CommitUpdate", st, err);
    return true;
  }

 private:
  static bool Fail(const char* what, const grpc::Status& st, std::string* err) {
    *err = std::string(what) + " " + std::to_string(st.error_code()) + " " + st.error_message();
    return false;
  }
  const Options& o_;
  std::unique_ptr<cv1::ClaimService::Stub> stub_;
};

class SqlPairer : public Pairer {
 public:
  SqlPairer(const Options& o) : o_(o) {
    conn_ = PQconnectdb(o.conninfo.c_str());
    if (PQstatus(conn_) != CONNECTION_OK) {
      fprintf(stderr, "grpc_pairs: %s", PQerrorMessage(conn_));
      exit(2);
    }
    Prepare("b", "SELECT public.claims_begin_update($1::jsonb) ->> 'lease_uuid'");
    Prepare("c", "SELECT public.claims_commit($1::bigint, $2::uuid)");
  }
  ~SqlPairer() override { PQfinish(conn_); }

  bool Pair(const std::string& value, long id, std::string* err) override {
    std::string cell = std::to_string(o_.cell), sid = std::to_string(id);
    std::string req = "{\"cell_id\": " + cell +
                      ", \"create_records\": [{\"bucket\": {\"type\": \"USERNAMES\", \"value\": \"" +
                      value + "\"}, \"subject\": {\"type\": \"USER\", \"id\": " + sid +
                      "}, \"source\": {\"type\": \"RAILS_TABLE_USERS\", \"rails_primary_key_id\": " +
                      sid + "}}]}";
    const char* bp[1] = {req.c_str()};
    PGresult* r = PQexecPrepared(conn_, "b", 1, bp, nullptr, nullptr, 0);
    if (PQresultStatus(r) != PGRES_TUPLES_OK) return Fail(r, err);
    std::string lease = PQgetvalue(r, 0, 0);
    PQclear(r);
    const char* cp[2] = {cell.c_str(), lease.c_str()};
    r = PQexecPrepared(conn_, "c", 2, cp, nullptr, nullptr, 0);
    if (PQresultStatus(r) != PGRES_TUPLES_OK) return Fail(r, err);
    PQclear(r);
    return true;
  }

 private:
  void Prepare(const char* name, const char* sql) {
    PGresult* r = PQprepare(conn_, name, sql, 0, nullptr);
    if (PQresultStatus(r) != PGRES_COMMAND_OK) {
      fprintf(stderr, "grpc_pairs: prepare: %s", PQerrorMessage(conn_));
      exit(2);
    }
    PQclear(r);
  }
  bool Fail(PGresult* r, std::string* err) {
    *err = std::string(PQresultErrorField(r, PG_DIAG_SQLSTATE) ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : "?") +
           " " + PQerrorMessage(conn_);
    PQclear(r);
    return false;
  }
  const Options& o_;
  PGconn* conn_;
};

struct Shared {
  std::mutex mu;
  std::vector<double> lat_ms;
  long errors = 0;
  std::string first_error;
};

// The worker's connection is kept (in *p) until the CPU times are read.
static void Worker(const Options& o, int tid, Clock::time_point start, Clock::time_point end,
                   Shared* out, std::unique_ptr<Pairer>* p) {
  if (o.mode == "grpc")
    p->reset(new GrpcPairer(o));
  else
    p->reset(new SqlPairer(o));
  std::vector<double> lat;
  long errors = 0, n = 0;
  std::string first;
  std::string err;
  // Warm-up: connections made, plans cached; not measured.
  while (Clock::now() < start) {
    n++;
    (*p)->Pair(o.prefix + "-w" + std::to_string(tid) + "-" + std::to_string(n), n, &err);
  }
  auto interval = std::chrono::duration<double>(o.rate > 0 ? o.threads / o.rate : 0);
  auto next = start + std::chrono::duration_cast<Clock::duration>(interval * tid / o.threads);
  while (true) {
    Clock::time_point t0;
    if (o.rate > 0) {
      if (next >= end) break;
      std::this_thread::sleep_until(next);
      t0 = next;
      next += std::chrono::duration_cast<Clock::duration>(interval);
    } else {
      t0 = Clock::now();
      if (t0 >= end) break;
    }
    n++;
    bool ok = (*p)->Pair(o.prefix + "-" + std::to_string(tid) + "-" + std::to_string(n), n, &err);
    double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    if (ok) {
      lat.push_back(ms);
    } else {
      if (errors++ == 0) first = err;
    }
  }
  std::lock_guard<std::mutex> g(out->mu);
  out->lat_ms.insert(out->lat_ms.end(), lat.begin(), lat.end());
  out->errors += errors;
  if (out->first_error.empty()) out->first_error = first;
}

// User + system seconds of this process (all threads).
static double SelfCpu() {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

// Clock ticks of /proc/PID/stat: utime + stime, plus cutime + cstime (its
// waited-for children) when children is set; 0 when it cannot be read.
static double ProcTicks(long pid, bool children) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(f, line)) return 0;
  size_t paren = line.rfind(')');
  if (paren == std::string::npos) return 0;
  std::istringstream in(line.substr(paren + 2));
  std::vector<std::string> v;
  std::string w;
  while (in >> w) v.push_back(w);
  // fields from 3 (state): utime is field 14, i.e. v[11]
  if (v.size() < 15) return 0;
  double t = atof(v[11].c_str()) + atof(v[12].c_str());
  if (children) t += atof(v[13].c_str()) + atof(v[14].c_str());
  return t;
}

// CPU seconds of the store: the postmaster's ended children and its living
// ones (the backends).
static double StoreCpu(long postmaster) {
  double t = ProcTicks(postmaster, true) - ProcTicks(postmaster, false);
  std::ifstream f("/proc/" + std::to_string(postmaster) + "/task/" + std::to_string(postmaster) +
                  "/children");
  long child;
  while (f >> child) t += ProcTicks(child, false);
  return t / sysconf(_SC_CLK_TCK);
}

static double Percentile(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  size_t i = static_cast<size_t>(q * v.size());
  if (i >= v.size()) i = v.size() - 1;
  std::nth_element(v.begin(), v.begin() + i, v.end());
  return v[i];
}

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--mode") o.mode = v;
    else if (k == "--target") o.target = v;
    else if (k == "--certs") o.certs = v;
    else if (k == "--ident") o.ident = v;
    else if (k == "--conninfo") o.conninfo = v;
    else if (k == "--prefix") o.prefix = v;
    else if (k == "--threads") o.threads = atoi(v.c_str());
    else if (k == "--seconds") o.seconds = atof(v.c_str());
    else if (k == "--warmup") o.warmup = atof(v.c_str());
    else if (k == "--rate") o.rate = atof(v.c_str());
    else if (k == "--cell") o.cell = atol(v.c_str());
    else if (k == "--deadline-ms") o.deadline_ms = atoi(v.c_str());
    else if (k == "--gateway-pid") o.gateway_pid = atol(v.c_str());
    else if (k == "--store-pid") o.store_pid = atol(v.c_str());
    else {
      fprintf(stderr, "grpc_pairs: unknown option %s\n", k.c_str());
      return 2;
    }
  }
  if ((o.mode != "grpc" && o.mode != "sql") || o.threads < 1 || o.seconds <= 0) {
    fprintf(stderr, "grpc_pairs: --mode grpc|sql, --threads >= 1, --seconds > 0\n");
    return 2;
  }
  Shared out;
  auto start = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                  std::chrono::duration<double>(o.warmup));
  auto end = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.seconds));
  std::vector<std::thread> threads;
  std::vector<std::unique_ptr<Pairer>> pairers(o.threads);
  for (int t = 0; t < o.threads; t++)
    threads.emplace_back(Worker, std::cref(o), t, start, end, &out, &pairers[t]);
  std::this_thread::sleep_until(start);
  double cpu0 = SelfCpu();
  double gw0 = o.gateway_pid ? ProcTicks(o.gateway_pid, false) / sysconf(_SC_CLK_TCK) : 0;
  double st0 = o.store_pid ? StoreCpu(o.store_pid) : 0;
  for (auto& t : threads) t.join();
  double cpu = SelfCpu() - cpu0;
  double gw = o.gateway_pid ? ProcTicks(o.gateway_pid, false) / sysconf(_SC_CLK_TCK) - gw0 : 0;
  double st = o.store_pid ? StoreCpu(o.store_pid) - st0 : 0;
  // Wall time of the measured part: with --rate, pairs that fell behind
  // their schedule run past the end and are counted at the rate achieved.
  double secs = std::chrono::duration<double>(std::max(Clock::now(), end) - start).count();
  size_t n = out.lat_ms.size();
  double p50 = Percentile(out.lat_ms, 0.50), p99 = Percentile(out.lat_ms, 0.99);
  double per = n ? 1e6 / n : 0;
  printf("pairs=%zu seconds=%.2f pairs_per_s=%.1f p50_ms=%.3f p99_ms=%.3f client_cpu_us=%.0f", n, secs,
         n / secs, p50, p99, cpu * per);
  if (o.gateway_pid) printf(" gateway_cpu_us=%.0f", gw * per);
  if (o.store_pid) printf(" store_cpu_us=%.0f", st * per);
  printf(" errors=%ld", out.errors);
  if (!out.first_error.empty()) {
    std::string e = out.first_error;
    std::replace(e.begin(), e.end(), '\n', ' ');
    printf(" first_error=%s", e.c_str());
  }
  printf("\n");
  return out.errors > 0 && n == 0 ? 1 : 0;
}
