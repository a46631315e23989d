// What runs before every route (cpp-httplib's pre-routing handler): the request's sizes from its
// head, the Host it was sent to and the Origin of the page that sent it (CORS preflights are
// answered here), the API key. The checks themselves are http_guard.h's pure functions.
#pragma once

#include <httplib.h>

#include <cstddef>
#include <string>
#include <vector>

#include "server/protocol.h"

namespace gemlet::server {

struct AdmissionOptions {
  std::string listen_host;                 // ServerOptions::host
  std::vector<std::string> allowed_hosts;  // --allow-host patterns
  std::vector<std::string> cors_origins;   // --cors-origin patterns
  std::string machine_hostname;
  std::string api_key;  // "": none needed
  size_t max_body_bytes = 4u << 20;
};

// True when the request was answered here (`res` holds the refusal or the preflight's answer);
// false lets it through to its route, with an allowed origin's CORS headers set on `res`.
bool Admit(const httplib::Request& req, httplib::Response& res, const AdmissionOptions& o);

// OpenAI's error object as a response; bytes of the request quoted in the message that are not
// UTF-8 are replaced.
std::string ErrorText(const ApiError& e);
void SendError(httplib::Response& res, const ApiError& e);

}  // namespace gemlet::server
