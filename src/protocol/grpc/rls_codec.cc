// RateLimitService messages <-> their plain structs: see rls_codec.h.
#include "protocol/grpc/rls_codec.h"

#include <algorithm>
#include <string>

namespace floodgate::rls {
namespace {

std::string TooLong(const char* what, size_t size, size_t max) {
  return std::string(what) + " is " + std::to_string(size) + " bytes; the limit is " +
         std::to_string(max);
}

}  // namespace

Status ToRequest(const pb::RateLimitRequest& in, const RequestLimits& limits, Request* out) {
  if (in.domain().size() > limits.max_domain_bytes) {
    return InvalidArgumentError(TooLong("domain", in.domain().size(), limits.max_domain_bytes));
  }
  if (static_cast<size_t>(in.descriptors_size()) > limits.max_descriptors) {
    return InvalidArgumentError("the request has " + std::to_string(in.descriptors_size()) +
                                " descriptors; the limit is " +
                                std::to_string(limits.max_descriptors));
  }
  out->domain = in.domain();
  out->hits_addend = in.hits_addend();
  // Resized, not cleared: the descriptors kept keep their entries' storage.
  out->descriptors.resize(in.descriptors_size());
  for (int i = 0; i < in.descriptors_size(); ++i) {
    const auto& d = in.descriptors(i);
    if (static_cast<size_t>(d.entries_size()) > limits.max_entries) {
      return InvalidArgumentError("a descriptor has " + std::to_string(d.entries_size()) +
                                  " entries; the limit is " + std::to_string(limits.max_entries));
    }
    RequestDescriptor& rd = out->descriptors[i];
    rd.entries.clear();
    for (const auto& e : d.entries()) {
      if (e.key().size() > limits.max_entry_bytes || e.value().size() > limits.max_entry_bytes) {
        return InvalidArgumentError(TooLong("a descriptor entry",
                                            std::max(e.key().size(), e.value().size()),
                                            limits.max_entry_bytes));
      }
      rd.entries.push_back({e.key(), e.value()});
    }
    rd.hits_addend.reset();
    if (d.has_hits_addend()) rd.hits_addend = d.hits_addend().value();
  }
  return Status::Ok();
}

void ToProto(const Response& in, pb::RateLimitResponse* out) {
  out->set_overall_code(static_cast<pb::RateLimitResponse::Code>(in.overall_code));
  for (const DescriptorStatus& st : in.statuses) {
    pb::RateLimitResponse::DescriptorStatus* s = out->add_statuses();
    s->set_code(static_cast<pb::RateLimitResponse::Code>(st.code));
    if (st.has_limit) {
      pb::RateLimitResponse::RateLimit* l = s->mutable_current_limit();
      l->set_requests_per_unit(st.current_limit.requests_per_unit);
      l->set_unit(static_cast<pb::RateLimitResponse::RateLimit::Unit>(st.current_limit.unit));
      if (!st.current_limit.name.empty()) l->set_name(st.current_limit.name);
    }
    s->set_limit_remaining(st.limit_remaining);
    if (st.duration_until_reset_ms >= 0) {
      s->mutable_duration_until_reset()->set_seconds(st.duration_until_reset_ms / 1000);
      s->mutable_duration_until_reset()->set_nanos(
          static_cast<int32_t>(st.duration_until_reset_ms % 1000) * 1'000'000);
    }
  }
  for (const Header& h : in.response_headers) {
    auto* header = out->add_response_headers_to_add();
    header->set_key(h.key);
    header->set_value(h.value);
  }
}

}  // namespace floodgate::rls
