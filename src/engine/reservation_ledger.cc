// ReservationLedger: see reservation_ledger.h. The record lives in the
// entry's own words, the tier in place, rather than behind a pointer: a
// reservation is short-lived and owns nothing, so it needs no release
// hook, no measuring of what it owns, and a snapshot writes its words as
// they are. The cost is the tier's room (64 bytes) in every record.
//
// The record keeps its own expiry to the millisecond because the entry's
// is kept in whole seconds (memory_store.h): until the second's end the
// entry may still be there with a record that is no longer live.
#include "engine/reservation_ledger.h"

#include <openssl/evp.h>

#include <cstring>

#include "floodgate/rule.h"

namespace floodgate::engine {
namespace {

// The first byte of a record key: which form follows.
constexpr char kDirectForm = 'd';  // rule length (2 bytes), rule, subject length (2), subject, id
constexpr char kDigestForm = 'h';  // SHA-256 of the triple with 8-byte lengths
constexpr size_t kDirectHead = 5;

// The entry's state. Copied in and out with memcpy (the words are
// int64_t; the record mixes them with bytes).
struct Record {
  int64_t expires_at_ms = 0;  // 0: no record (a zeroed state)
  int64_t settled = 0;        // 0: held; 1: a settled marker, which holds nothing else
  int64_t estimate = 0;
  int64_t tier_bytes = 0;
  char tier[store::kMaxReservationTierBytes] = {};

  bool LiveAt(int64_t now_ms) const { return expires_at_ms > now_ms; }
};
static_assert(sizeof(Record) % sizeof(int64_t) == 0);
constexpr int kRecordWords = static_cast<int>(sizeof(Record) / sizeof(int64_t));

Record Read(const int64_t* state) {
  Record r;
  std::memcpy(&r, state, sizeof(r));
  return r;
}

void Write(const Record& r, int64_t* state) { std::memcpy(state, &r, sizeof(r)); }

// A record as a snapshot holds it: its words as they are (encode is the
// default), refused when they are no record this ledger wrote, so that a
// damaged file never gives Take a tier length past the record's bytes.
bool DecodeRecord(std::string_view in, int words, int64_t /*now_ms*/, int64_t* state) {
  if (words != kRecordWords || in.size() != sizeof(Record)) return false;
  Record r;
  std::memcpy(&r, in.data(), sizeof(r));
  if (r.expires_at_ms < 0 || (r.settled != 0 && r.settled != 1) || r.estimate < 0 ||
      r.estimate > kMaxLimitCount || r.tier_bytes < 0 ||
      r.tier_bytes > static_cast<int64_t>(store::kMaxReservationTierBytes)) {
    return false;
  }
  Write(r, state);
  return true;
}

void PutLength(std::string* out, uint64_t n, int bytes) {
  for (int shift = (bytes - 1) * 8; shift >= 0; shift -= 8) {
    out->push_back(static_cast<char>((n >> shift) & 0xff));
  }
}

Status CheckHold(const store::HoldOp& op, int64_t now_ms) {
  if (Status s = store::CheckHoldArgs(op); !s.ok()) return s;
  // Before the addition: an explicit instant may be anything.
  if (now_ms < 0 || now_ms > INT64_MAX - op.ttl_ms) {
    return InvalidArgumentError("the instant " + std::to_string(now_ms) + " is out of range");
  }
  return Status::Ok();
}

}  // namespace

VariantLayout ReservationLedger::Layout() {
  return VariantLayout{.state_words = kRecordWords, .decode = &DecodeRecord};
}

std::string ReservationLedger::RecordKey(std::string_view rule, std::string_view subject,
                                         std::string_view id) {
  std::string key;
  if (rule.size() <= 0xffff && subject.size() <= 0xffff &&
      kDirectHead + rule.size() + subject.size() + id.size() <= kMaxKeyBytes) {
    // Rule names are at most 64 bytes and ids at most 64: every subject of
    // up to 379 bytes takes this form.
    key.reserve(kDirectHead + rule.size() + subject.size() + id.size());
    key.push_back(kDirectForm);
    PutLength(&key, rule.size(), 2);
    key.append(rule);
    PutLength(&key, subject.size(), 2);
    key.append(subject).append(id);
    return key;
  }
  // The whole triple, each length first (8 bytes: any length), hashed.
  std::string triple;
  triple.reserve(16 + rule.size() + subject.size() + id.size());
  PutLength(&triple, rule.size(), 8);
  triple.append(rule);
  PutLength(&triple, subject.size(), 8);
  triple.append(subject).append(id);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  key.push_back(kDigestForm);
  if (EVP_Digest(triple.data(), triple.size(), digest, &size, EVP_sha256(), nullptr) != 1) {
    // Only a broken OpenSSL fails here. The triple's own bytes, cut to
    // fit, still name it for every triple that differs within them.
    key.append(triple, 0, kMaxKeyBytes - 1);
    return key;
  }
  key.append(reinterpret_cast<const char*>(digest), size);
  return key;
}

store::Answer ReservationLedger::Hold(const store::HoldOp& op, Status* status, store::Later<>) {
  *status = HoldAt(op, op.at_ms != nullptr ? *op.at_ms : clock_.NowMs());
  return store::Answer::kNow;
}

store::Answer ReservationLedger::Take(const store::TakeOp& op, store::TakeResult* result,
                                      Status* status, store::Later<store::TakeResult>) {
  *status = TakeAt(op, op.at_ms != nullptr ? *op.at_ms : clock_.NowMs(), result);
  return store::Answer::kNow;
}

Status ReservationLedger::HoldAt(const store::HoldOp& op, int64_t now_ms) {
  if (Status s = CheckHold(op, now_ms); !s.ok()) return s;
  const std::string key = RecordKey(op.rule, op.subject, op.id);
  bool exists = false;
  // The record owns nothing: the step has no room to claim from (null).
  const Status s =
      store_.Update(variant_, key, now_ms, [&](int64_t* state, bool, core::MemoryRoom*) {
        const Record found = Read(state);
        if (found.LiveAt(now_ms)) {
          exists = true;  // held or settled: left as it is
          return found.expires_at_ms;
        }
        Record r;
        r.expires_at_ms = now_ms + op.ttl_ms;
        r.estimate = op.estimate;
        r.tier_bytes = static_cast<int64_t>(op.tier.size());
        std::memcpy(r.tier, op.tier.data(), op.tier.size());
        Write(r, state);
        return r.expires_at_ms;
      });
  if (s.code() == StatusCode::kResourceExhausted) {
    return ResourceExhaustedError("cannot hold a new reservation: " + s.message());
  }
  if (!s.ok()) return s;
  // The id is not repeated: it is what settles the reservation.
  if (exists) return AlreadyExistsError("a reservation of this id is held already");
  return Status::Ok();
}

Status ReservationLedger::TakeAt(const store::TakeOp& op, int64_t now_ms,
                                 store::TakeResult* result) {
  *result = store::TakeResult{};
  if (Status s = store::CheckReservationId(op.id); !s.ok()) return s;
  const std::string key = RecordKey(op.rule, op.subject, op.id);
  store::TakeResult out;
  const Status s =
      store_.Update(variant_, key, now_ms, [&](int64_t* state, bool, core::MemoryRoom*) {
        const Record found = Read(state);
        // No record, or one past its TTL: "keep nothing" creates no entry
        // for an unknown id and frees a dead record's at once.
        if (!found.LiveAt(now_ms)) return int64_t{0};
        if (found.settled != 0) {
          out.outcome = store::TakeOutcome::kSettled;
          return found.expires_at_ms;
        }
        out.outcome = store::TakeOutcome::kTaken;
        out.estimate = found.estimate;
        out.tier.assign(found.tier, static_cast<size_t>(found.tier_bytes));
        // The marker keeps the record's expiry and nothing else.
        Record marker;
        marker.expires_at_ms = found.expires_at_ms;
        marker.settled = 1;
        Write(marker, state);
        return marker.expires_at_ms;
      });
  if (!s.ok()) return s;
  *result = std::move(out);
  return Status::Ok();
}

}  // namespace floodgate::engine
