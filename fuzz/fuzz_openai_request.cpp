// Fuzzes the OpenAI request parsing of the server (src/server/openai_protocol.h): the HTTP body
// as JSON (parse_body), then the field checks of /v1/chat/completions and /v1/completions
// (parse_chat_request, parse_completion_request). Every byte comes from a network client. Bad
// input is answered with a 400: server::ApiError (or dflash::Error) is the expected outcome; any
// other exception escaping here would reach the HTTP layer as a 500 or abort, and is a finding.
//
// Input: the request body, as received.
#include <cstdint>
#include <string>

#include "fuzz_input.h"
#include "server/api_error.h"
#include "server/openai_protocol.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace srv = dflash::server;
  const std::string body(fuzz::as_view(data, size));
  srv::ojson j;
  try {
    j = srv::parse_body(body);
  } catch (const srv::ApiError&) {
    return 0;
  } catch (const dflash::Error&) {
    return 0;
  }
  const dflash::SamplingParams defaults;
  // Both endpoints see the same body: a field one of them ignores is still parsed by the other.
  try {
    srv::ApiRequest r = srv::parse_chat_request(j, defaults);
    (void)srv::dump(r.messages);  // the normalized messages go to the chat template as JSON
    (void)srv::dump(r.template_kwargs);
  } catch (const srv::ApiError&) {
  } catch (const dflash::Error&) {
  }
  try {
    srv::ApiRequest r = srv::parse_completion_request(j, defaults);
    (void)srv::dump(srv::ojson(r.prompt_text));
  } catch (const srv::ApiError&) {
  } catch (const dflash::Error&) {
  }
  return 0;
}
