// /metrics families of the subjects room (service/subjects/subjects.h):
// the lists' sizes and matches, missing key parts, refused tokens.
#pragma once

#include <string>

#include "service/subjects/subjects.h"

namespace floodgate::server {

// Appends nothing while no rule reads the request or has a list.
void AppendSubjectMetrics(const service::Subjects& subjects, std::string* out);

}  // namespace floodgate::server
