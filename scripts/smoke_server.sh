#!/bin/sh
# Smoke test against a running `dflash serve`: health, a short answer, a stream, the think cap.
# Usage: scripts/smoke_server.sh [BASE_URL] (default http://127.0.0.1:8006); DFLASH_API_KEY is
# sent as the bearer token when set. Exits non-zero on the first failure.
set -eu
BASE=${1:-http://127.0.0.1:8006}
AUTH=""
[ -n "${DFLASH_API_KEY:-}" ] && AUTH="Authorization: Bearer $DFLASH_API_KEY"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
post() {  # post PATH JSON -> body in $TMP/out, HTTP status printed
  curl -sS -m 120 -o "$TMP/out" -w '%{http_code}' ${AUTH:+-H "$AUTH"} -H 'Content-Type: application/json' \
    -d "$2" "$BASE$1"
}
has() { grep -q "$1" "$TMP/out" || fail "$2: $(head -c 400 "$TMP/out")"; }

code=$(curl -sS -m 10 -o "$TMP/out" -w '%{http_code}' "$BASE/health") || fail "no server at $BASE"
[ "$code" = 200 ] || fail "/health answered $code: $(cat "$TMP/out")"
echo "ok   health"

model=$(curl -sS -m 10 ${AUTH:+-H "$AUTH"} "$BASE/v1/models" | sed -n 's/.*"data":\[{"id":"\([^"]*\)".*/\1/p')
[ -n "$model" ] || fail "/v1/models lists no model"
echo "ok   model $model"

code=$(post /v1/chat/completions '{"model":"'"$model"'","messages":[{"role":"user","content":"Say hello."}],"max_tokens":32,"temperature":0,"chat_template_kwargs":{"enable_thinking":false}}')
[ "$code" = 200 ] || fail "chat answered $code: $(cat "$TMP/out")"
has '"content":"' "no content in the answer"
has '"dflash":{' "no dflash block"
echo "ok   short answer: $(sed -n 's/.*"content":"\([^"]\{0,60\}\).*/\1/p' "$TMP/out")"
echo "     dflash: $(sed -n 's/.*"dflash":\({[^}]*}\).*/\1/p' "$TMP/out")"

code=$(post /v1/chat/completions '{"model":"'"$model"'","messages":[{"role":"user","content":"Count to five."}],"max_tokens":32,"temperature":0,"stream":true,"stream_options":{"include_usage":true}}')
[ "$code" = 200 ] || fail "stream answered $code"
has 'chat.completion.chunk' "no chunks in the stream"
has '"usage":{' "no usage chunk"
tail -c 20 "$TMP/out" | grep -q 'data: \[DONE\]' || fail "the stream does not end with data: [DONE]"
echo "ok   stream: $(grep -c '^data: ' "$TMP/out") events"

# The answer starts inside an open <think>, so a cap of 16 must close it and leave room to answer.
code=$(post /v1/chat/completions '{"model":"'"$model"'","messages":[{"role":"user","content":"Reverse a list."},{"role":"assistant","content":"<think>\n"}],"continue_final_message":true,"think_cap":16,"max_tokens":64,"temperature":0}')
[ "$code" = 200 ] || fail "think-cap request answered $code: $(cat "$TMP/out")"
if curl -sS -m 10 ${AUTH:+-H "$AUTH"} "$BASE/v1/models" | grep -q '"reasoning":true'; then
  has '"think_capped":true' "think cap did not trigger"
  has '"reasoning_content":"' "no reasoning_content"
  echo "ok   think cap: think_capped true"
else
  echo "skip think cap: this model has no <think> tokens"
fi

curl -sS -m 10 ${AUTH:+-H "$AUTH"} "$BASE/metrics" | grep -q '^dflash_requests_total' || fail "/metrics has no dflash_requests_total"
echo "ok   metrics"
echo "smoke test passed against $BASE"
