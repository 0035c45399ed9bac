#!/bin/bash
# query_test.sh - "flashtrie serve" and "flashtrie query" end to end: the
# answers through the server, over ipc:// and tcp://127.0.0.1 with batch 1
# and 32, are byte-identical to "flashtrie search" on the same index and
# requests (the tests' file and a generated larger one); --ping, --info;
# the nngcat JSON round trip; dup_check = engine answering as search does;
# config errors by line; SIGTERM exits 0;
# --reload PATH; a server lost mid-run; TLS without a CA, --tls-insecure
# and a failed handshake.
# usage: query_test.sh FLASHTRIE DATA_DIR
set -u
BIN=$1 DATA=$2
TMP=$(mktemp -d)
PID=
cleanup() {
  [ -n "$PID" ] && kill -TERM "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
  rm -rf "$TMP"
}
trap cleanup EXIT
fail() { echo "query_test: $*" >&2; [ -f "$TMP/log" ] && tail -20 "$TMP/log" >&2; exit 1; }
# Ports from the pid, so that parallel runs of the suite do not collide.
PORT=$((20000 + $$ % 20000))

# start_server ARGS...: starts serve in the background, waits for --ping.
start_server() {
  "$BIN" serve "$@" 2> "$TMP/log" &
  PID=$!
  "$BIN" query --url "$URL" --ping --timeout-ms 20000 ||
    fail "server at $URL did not answer a ping"
}
stop_server() {
  kill -TERM "$PID"
  wait "$PID"
  local rc=$?
  PID=
  [ $rc -eq 0 ] || fail "serve exited $rc after SIGTERM"
  grep -q "drained: every request answered" "$TMP/log" || fail "no drain line in the log"
}

"$BIN" build --input "$DATA/cli_keys.txt" --output "$TMP/small.fti" > /dev/null ||
  fail "build small"
"$BIN" gen keys --n 20000 --seed 5 --output "$TMP/big.keys" 2> /dev/null || fail "gen keys"
"$BIN" build --input "$TMP/big.keys" --output "$TMP/big.fti" > /dev/null || fail "build big"
"$BIN" gen requests --index "$TMP/big.fti" --n 200 --beam 20 --results 7 --seed 9 \
  > "$TMP/big_req.jsonl" 2> /dev/null || fail "gen requests"
# A few lines search rejects, so the error lines are compared too.
printf '\n{"tokens": [[1]]}\n{"tokens": [[1,1]], "logp": [[-1,-2]]}\nnot json\n' >> "$TMP/big_req.jsonl"

for idx in small big; do
  if [ $idx = small ]; then REQ=$DATA/cli_requests.jsonl; else REQ=$TMP/big_req.jsonl; fi
  "$BIN" search --index "$TMP/$idx.fti" --engine cpu < "$REQ" > "$TMP/want.jsonl" ||
    fail "search $idx"
  for URL in "ipc://$TMP/sock" "tcp://127.0.0.1:$PORT"; do
    start_server --index "$TMP/$idx.fti" --listen "$URL" --engine cpu --threads 2
    if [ $idx = small ] && [ "${URL#tcp://}" != "$URL" ]; then
      # A second server on the same address cannot listen: exit 1, saying so.
      # (tcp:// only: on ipc:// nng probes the path and, when its probe
      # fails, takes the path over from the live server; docs/daemon.md.)
      "$BIN" serve --index "$TMP/$idx.fti" --listen "$URL" --engine cpu 2> "$TMP/err2"
      rc=$?
      [ $rc -eq 1 ] || fail "second server on $URL: exit $rc, want 1"
      grep -q "cannot listen: $URL" "$TMP/err2" || fail "second server: $(tail -1 "$TMP/err2")"
    fi
    for b in 1 32; do
      "$BIN" query --url "$URL" --batch $b --concurrency 4 < "$REQ" > "$TMP/got.jsonl"
      rc=$?
      [ $rc -eq 0 ] || { diff "$TMP/got.jsonl" "$TMP/want.jsonl" | head -5 >&2;
                         "$BIN" query --url "$URL" --info | grep -E "^(engine|batches|in_flight|total|status|depth)" >&2;
                         fail "query $idx $URL batch $b exited $rc"; }
      cmp -s "$TMP/got.jsonl" "$TMP/want.jsonl" ||
        { diff "$TMP/got.jsonl" "$TMP/want.jsonl" | head >&2; fail "$idx $URL batch $b: output differs from search"; }
    done
    stop_server
  done
done

# A manifest of shards is served the same way (a shard group per replica):
# the answers are still byte-identical to search over the whole index.
"$BIN" split "$TMP/big.fti" --output "$TMP/big.ftm" --shards 3 --quiet > /dev/null ||
  fail "split"
"$BIN" search --index "$TMP/big.fti" --engine cpu < "$TMP/big_req.jsonl" > "$TMP/want.jsonl"
URL="ipc://$TMP/sock"
start_server --index "$TMP/big.ftm" --listen "$URL" --engine cpu --threads 1 --replicas 2
"$BIN" query --url "$URL" --batch 32 --concurrency 4 < "$TMP/big_req.jsonl" > "$TMP/got.jsonl" ||
  fail "query (manifest)"
cmp -s "$TMP/got.jsonl" "$TMP/want.jsonl" || fail "manifest: output differs from search"
# Input that cannot be read (a directory on stdin) is no empty input:
# exit 1, saying so, nothing written.
"$BIN" query --url "$URL" < "$TMP" > "$TMP/got.jsonl" 2> "$TMP/err3"
rc=$?
[ $rc -eq 1 ] || fail "query of a directory: exit $rc, want 1"
[ "$(cat "$TMP/err3")" = "flashtrie query: cannot read the input: Is a directory" ] ||
  fail "query of a directory: $(cat "$TMP/err3")"
[ ! -s "$TMP/got.jsonl" ] || fail "query of a directory wrote output"
"$BIN" query --url "$URL" --info > "$TMP/info" || fail "--info (manifest)"
grep -q "^shards: 3$" "$TMP/info" || fail "INFO: no 'shards: 3'"
grep -q "^replicas: 2$" "$TMP/info" || fail "INFO: no 'replicas: 2'"
stop_server

# INFO, and the nngcat session of docs/daemon.md: a JSON line in, the
# line search prints out.
URL="ipc://$TMP/sock"
start_server --index "$TMP/small.fti" --listen "$URL" --engine cpu --threads 1 \
  --admin-listen "ipc://$TMP/admin"
"$BIN" query --url "$URL" --info > "$TMP/info" || fail "--info"
for k in "# server" "# index" "# engines" "# queue" "# requests" "# limits" \
         "keys: 7" "engine.0.kind: cpu" "capacity: 1024" "latency_p99_us:" \
         "max_message_bytes: 67108864" "caps.max_beam: 4096" "listeners: 2"; do
  grep -q "^$k" "$TMP/info" || fail "INFO lacks '$k'"
done
# A plain listener tells no pid, paths, addresses or settings (issue 39).
for k in "# config" "pid:" "path:" "listener.0:" "index:"; do
  grep -q "^$k" "$TMP/info" && fail "INFO on a plain listener shows '$k'"
done
grep -q "$TMP" "$TMP/info" && fail "INFO on a plain listener names $TMP"
"$BIN" query --url "ipc://$TMP/admin" --info > "$TMP/info" || fail "--info (admin)"
for k in "# config" "pid: $PID" "path: $TMP/small.fti" "listener.1: ipc://$TMP/admin admin" \
         "index: $TMP/small.fti (cli)"; do
  grep -q "^$k" "$TMP/info" || fail "INFO on the admin listener lacks '$k'"
done
if command -v nngcat > /dev/null; then
  LINE=$(head -1 "$DATA/cli_requests.jsonl")
  nngcat --req0 --dial "$URL" --data "$LINE" --raw > "$TMP/nngcat.out" || fail "nngcat"
  "$BIN" search --index "$TMP/small.fti" --engine cpu <<< "$LINE" > "$TMP/nngcat.want"
  cmp -s "$TMP/nngcat.out" "$TMP/nngcat.want" ||
    fail "nngcat answer '$(cat "$TMP/nngcat.out")' is not search's '$(cat "$TMP/nngcat.want")'"
  nngcat --req0 --dial "$URL" --data '{"tokens": [[1]], "logp": [[-1]], "beam": 0}' --raw \
    > "$TMP/nngcat.out" || fail "nngcat bad request"
  grep -q '^{"error": "beam: ' "$TMP/nngcat.out" || fail "nngcat error line: $(cat "$TMP/nngcat.out")"
else
  echo "query_test: nngcat not installed; its round trip skipped"
fi
stop_server

# dup_check = engine: a JSON line with a token twice is refused by the
# engine's thread with the bytes the door (and search) give; the other
# lines of the file are answered the same; the start log says where.
DUP='{"id": 9, "tokens": [[3, 3, 8]], "logp": [[-0.5, -1, -2]], "beam": 2}'
printf '%s\n' "$DUP" > "$TMP/dup.jsonl"
cat "$DATA/cli_requests.jsonl" >> "$TMP/dup.jsonl"
"$BIN" search --index "$TMP/small.fti" --engine cpu < "$TMP/dup.jsonl" > "$TMP/dup.want"
grep -q '^{"id": 9, "error": "tokens: position 0: token 3 appears twice (proposals 0 and 1)"}$' \
  "$TMP/dup.want" || fail "search's line for a token twice: $(head -1 "$TMP/dup.want")"
start_server --index "$TMP/small.fti" --listen "$URL" --engine cpu --threads 1 \
  --dup-check engine
grep -q "duplicate tokens: checked on the engine's thread, beside its work (dup_check = engine)" \
  "$TMP/log" || fail "dup_check = engine: no start line"
"$BIN" query --url "$URL" < "$TMP/dup.jsonl" > "$TMP/dup.got" || fail "query (dup_check engine)"
cmp -s "$TMP/dup.got" "$TMP/dup.want" || fail "dup_check = engine: answers differ from search's"
if command -v nngcat > /dev/null; then
  nngcat --req0 --dial "$URL" --data "$DUP" --raw > "$TMP/nngcat.out" || fail "nngcat dup"
  head -1 "$TMP/dup.want" | cmp -s - "$TMP/nngcat.out" ||
    fail "dup_check = engine, JSON: '$(cat "$TMP/nngcat.out")'"
fi
stop_server

# A server that is not there: query fails with 1, --ping times out with 1.
"$BIN" query --url "ipc://$TMP/none" < "$DATA/cli_requests.jsonl" > /dev/null 2>&1
[ $? -eq 1 ] || fail "query to no server: want exit 1"
"$BIN" query --url "ipc://$TMP/none" --ping --timeout-ms 300 2> /dev/null
[ $? -eq 1 ] || fail "ping to no server: want exit 1"

# Config errors name the file and line; bad flags exit 2.
printf 'index = "%s";\nqueue_depth = 0;\n' "$TMP/small.fti" > "$TMP/bad.conf"
"$BIN" serve --config "$TMP/bad.conf" 2> "$TMP/err" && fail "bad config accepted"
grep -q "bad.conf:2: queue_depth" "$TMP/err" || fail "config error: $(cat "$TMP/err")"
printf 'index = "%s";\nno_such_key = 1;\n' "$TMP/small.fti" > "$TMP/bad2.conf"
"$BIN" serve --config "$TMP/bad2.conf" 2> "$TMP/err" && fail "unknown key accepted"
grep -q "bad2.conf:2: no_such_key" "$TMP/err" || fail "config error: $(cat "$TMP/err")"
"$BIN" serve --index "$TMP/small.fti" --engine tpu 2> /dev/null
[ $? -eq 2 ] || fail "--engine tpu: want 2"
# A bad flag value names the flag as typed, not the setting behind it.
"$BIN" serve --index "$TMP/small.fti" --max-batch 0 2> "$TMP/err"
[ $? -eq 2 ] || fail "--max-batch 0: want 2"
[ "$(cat "$TMP/err")" = "flashtrie serve: --max-batch: cli: max_batch: must be 1..64, got 0" ] ||
  fail "--max-batch 0: $(cat "$TMP/err")"
"$BIN" serve --index "$TMP/small.fti" --threads x 2> "$TMP/err"
[ $? -eq 2 ] || fail "--threads x: want 2"
[ "$(cat "$TMP/err")" = "flashtrie serve: --threads: cli: cpu_threads: expected an integer, got 'x'" ] ||
  fail "--threads x: $(cat "$TMP/err")"
# An empty --listen (an unset variable) or a trailing comma is refused, not
# read as "no --listen" (the default tcp://127.0.0.1:7710) or as the URLs
# before the comma; timeout stops a server that took it.
timeout 5 "$BIN" serve --index "$TMP/small.fti" --listen "" 2> "$TMP/err"
[ $? -eq 2 ] || fail "--listen '': want 2"
[ "$(cat "$TMP/err")" = "flashtrie serve: cli: listeners: expected at least one URL" ] ||
  fail "--listen '': $(cat "$TMP/err")"
timeout 5 "$BIN" serve --index "$TMP/small.fti" --listen "ipc://$TMP/s3," 2> "$TMP/err"
[ $? -eq 2 ] || fail "--listen URL,: want 2"
[ "$(cat "$TMP/err")" = "flashtrie serve: cli: listeners: empty URL in 'ipc://$TMP/s3,'" ] ||
  fail "--listen URL,: $(cat "$TMP/err")"
timeout 5 "$BIN" serve --index "$TMP/small.fti" --listen "ipc://$TMP/s3" --listen "" 2> "$TMP/err"
[ $? -eq 2 ] || fail "--listen URL --listen '': want 2"
[ "$(cat "$TMP/err")" = "flashtrie serve: cli: listeners: empty URL in 'ipc://$TMP/s3,'" ] ||
  fail "--listen URL --listen '': $(cat "$TMP/err")"
"$BIN" serve --index "$TMP/missing.fti" --listen "ipc://$TMP/s2" 2> "$TMP/err"
[ $? -ne 0 ] || fail "missing index accepted"
grep -q "missing.fti" "$TMP/err" || fail "missing index: $(cat "$TMP/err")"

# A config file serves like the flags do.
printf 'index = "%s";\nlisteners = ( { url = "%s"; } );\nengine = "cpu";\ncpu_threads = 1;\n' \
  "$TMP/small.fti" "$URL" > "$TMP/good.conf"
start_server --config "$TMP/good.conf"
"$BIN" query --url "$URL" < "$DATA/cli_requests.jsonl" > "$TMP/got.jsonl" || fail "query (config)"
"$BIN" search --index "$TMP/small.fti" --engine cpu < "$DATA/cli_requests.jsonl" > "$TMP/want.jsonl"
cmp -s "$TMP/got.jsonl" "$TMP/want.jsonl" || fail "config server: output differs"

# SIGHUP re-reads the file: a new index path takes effect; a setting that
# needs a restart refuses the reload, naming it, and the old one serves.
"$BIN" search --index "$TMP/big.fti" --engine cpu < "$TMP/big_req.jsonl" > "$TMP/want_big.jsonl"
printf 'index = "%s";\nlisteners = ( { url = "%s"; } );\nengine = "cpu";\ncpu_threads = 1;\n' \
  "$TMP/big.fti" "$URL" > "$TMP/good.conf.new"
mv "$TMP/good.conf.new" "$TMP/good.conf"
kill -HUP "$PID"
for i in $(seq 100); do
  grep -q "reloaded: now serving generation 2: $TMP/big.fti" "$TMP/log" && break
  sleep 0.1
done
grep -q "reloaded: now serving generation 2" "$TMP/log" || fail "SIGHUP did not reload"
"$BIN" query --url "$URL" --batch 8 < "$TMP/big_req.jsonl" > "$TMP/got.jsonl" || fail "query after SIGHUP"
cmp -s "$TMP/got.jsonl" "$TMP/want_big.jsonl" || fail "after SIGHUP: not the new index's answers"
printf 'queue_depth = 7;\n' >> "$TMP/good.conf"
kill -HUP "$PID"
for i in $(seq 100); do grep -q "config .* refused" "$TMP/log" && break; sleep 0.1; done
grep -q "refused: .*queue_depth" "$TMP/log" || fail "a restart-only change was not refused by name: $(tail -2 "$TMP/log")"
"$BIN" query --url "$URL" --batch 8 < "$TMP/big_req.jsonl" > "$TMP/got.jsonl" || fail "query after refused SIGHUP"
cmp -s "$TMP/got.jsonl" "$TMP/want_big.jsonl" || fail "after a refused SIGHUP: answers changed"
stop_server

# --reload PATH (a separate argument, as --help writes it) and --reload=PATH;
# a plain listener's refusal is printed once, not "reload: reload: ...".
URL="ipc://$TMP/sock"
ADMIN="ipc://$TMP/admin"
start_server --index "$TMP/small.fti" --listen "$URL" --admin-listen "$ADMIN" \
  --admin-reload --engine cpu --threads 1
"$BIN" query --url "$URL" --reload "$TMP/big.fti" > /dev/null 2> "$TMP/err"
rc=$?
[ $rc -eq 1 ] || fail "--reload PATH on a plain listener: exit $rc, want 1: $(cat "$TMP/err")"
[ "$(cat "$TMP/err")" = "flashtrie query: reload: not allowed on this listener (not admin) (not permitted)" ] ||
  fail "--reload refusal: '$(cat "$TMP/err")'"
"$BIN" query --url "$ADMIN" --reload "$TMP/big.fti" > "$TMP/out" 2> "$TMP/err" ||
  fail "--reload PATH: $(cat "$TMP/err")"
grep -q "^reloaded " "$TMP/out" || fail "--reload PATH printed '$(cat "$TMP/out")'"
"$BIN" query --url "$URL" --batch 8 < "$TMP/big_req.jsonl" > "$TMP/got.jsonl" || fail "query after --reload PATH"
cmp -s "$TMP/got.jsonl" "$TMP/want_big.jsonl" || fail "after --reload PATH: not the new index's answers"
"$BIN" query --url "$ADMIN" --reload="$TMP/small.fti" > "$TMP/out" 2> "$TMP/err" ||
  fail "--reload=PATH: $(cat "$TMP/err")"
"$BIN" query --url "$ADMIN" --reload > "$TMP/out" 2> "$TMP/err" ||
  fail "--reload (the configured index): $(cat "$TMP/err")"
"$BIN" query --url "$ADMIN" --reload a b > /dev/null 2> "$TMP/err"
[ $? -eq 2 ] || fail "--reload a b: want exit 2"
stop_server

# Bad flag values: 2, the message starting "flashtrie query:" as every
# command's does.
"$BIN" query --url "$URL" --batch 0 < /dev/null > /dev/null 2> "$TMP/err"
rc=$?
[ $rc -eq 2 ] || fail "--batch 0: exit $rc, want 2"
[ "$(cat "$TMP/err")" = "flashtrie query: --batch: expected an integer in 1..1024, got '0'" ] ||
  fail "--batch 0: '$(cat "$TMP/err")'"
"$BIN" query --url "$URL" --timeout-ms x --ping > /dev/null 2> "$TMP/err"
rc=$?
[ $rc -eq 2 ] || fail "--timeout-ms x: exit $rc, want 2"
[ "$(cat "$TMP/err")" = "flashtrie query: --timeout-ms: expected an integer in 1..86400000, got 'x'" ] ||
  fail "--timeout-ms x: '$(cat "$TMP/err")'"

# A URL nng cannot dial is a bad argument (2), named with the reason;
# a server that is not there is not (1).
for args in "--ping" "--info" ""; do
  # shellcheck disable=SC2086
  "$BIN" query --url foo://x $args < /dev/null > /dev/null 2> "$TMP/err"
  rc=$?
  [ $rc -eq 2 ] || fail "--url foo://x $args: exit $rc, want 2"
  [ "$(cat "$TMP/err")" = "flashtrie query: foo://x: unsupported URL scheme (expected tcp://, tls+tcp:// or ipc://)" ] ||
    fail "--url foo://x $args: '$(cat "$TMP/err")'"
done
"$BIN" query --url tcp:// --ping > /dev/null 2> "$TMP/err"
rc=$?
[ $rc -eq 2 ] || fail "--url tcp://: exit $rc, want 2"
[ "$(cat "$TMP/err")" = "flashtrie query: tcp://: Address invalid" ] ||
  fail "--url tcp://: '$(cat "$TMP/err")'"
"$BIN" query --url "ipc://$TMP/nobody.sock" --info > /dev/null 2> "$TMP/err"
rc=$?
[ $rc -eq 1 ] || fail "no server: exit $rc, want 1"
[ "$(cat "$TMP/err")" = "flashtrie query: ipc://$TMP/nobody.sock: cannot connect: Connection refused" ] ||
  fail "no server: '$(cat "$TMP/err")'"

# A server that goes away mid-run: query stops at once (not one timeout per
# batch), prints the answers it got, in order, and says on one line where
# it stopped and why.
"$BIN" gen requests --index "$TMP/big.fti" --n 1200 --beam 20 --seed 4 \
  > "$TMP/req1200.jsonl" 2> /dev/null || fail "gen requests 1200"
"$BIN" search --index "$TMP/big.fti" --engine cpu < "$TMP/req1200.jsonl" > "$TMP/want.jsonl"
URL="tcp://127.0.0.1:$((PORT + 1))"
for sig in KILL TERM; do
  start_server --index "$TMP/big.fti" --listen "$URL" --engine cpu --threads 1 \
    --max-batch 8 --test-delay-us 20000
  ( sleep 0.5; kill -$sig "$PID" ) &
  t0=$(date +%s%N)
  "$BIN" query --url "$URL" --batch 8 --concurrency 8 < "$TMP/req1200.jsonl" \
    > "$TMP/got.jsonl" 2> "$TMP/err"
  rc=$?
  ms=$((($(date +%s%N) - t0) / 1000000))
  wait "$PID" 2> /dev/null
  PID=
  [ $rc -eq 1 ] || fail "SIG$sig mid-run: query exited $rc, want 1"
  [ $ms -lt 8000 ] || fail "SIG$sig mid-run: query took $ms ms"
  [ "$(wc -l < "$TMP/err")" -eq 1 ] || fail "SIG$sig mid-run: stderr: $(head -3 "$TMP/err")"
  n=$(wc -l < "$TMP/got.jsonl")
  E="flashtrie query: (${URL//./\\.}: connection lost: (no answer to SEARCH|SEARCH not sent \(no server for [0-9]+ ms\))|server: draining; no new requests taken); stopped at input line $((n + 1)) \(the lines before it are answered\)"
  grep -Eqx "$E" "$TMP/err" || fail "SIG$sig mid-run: stderr '$(cat "$TMP/err")'"
  [ "$n" -lt 1200 ] || fail "SIG$sig mid-run: all 1200 lines answered; the server was not stopped mid-run"
  head -n "$n" "$TMP/want.jsonl" | cmp -s - "$TMP/got.jsonl" ||
    fail "SIG$sig mid-run: the lines printed are not search's first $n"
done

# TLS: no --tls-ca is refused (exit 2) unless --tls-insecure (a warning);
# a failed handshake is named at once, not after --timeout-ms.
if command -v openssl > /dev/null; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$TMP/key.pem" -out "$TMP/cert.pem" -days 2 -subj /CN=localhost \
    -addext subjectAltName=DNS:localhost,IP:127.0.0.1 > /dev/null 2>&1 || fail "openssl"
  HOST="127.0.0.1:$((PORT + 2))"
  URL="tls+tcp://$HOST"
  "$BIN" serve --index "$TMP/small.fti" --listen "$URL" --engine cpu --threads 1 \
    --tls-cert "$TMP/cert.pem" --tls-key "$TMP/key.pem" 2> "$TMP/log" &
  PID=$!
  "$BIN" query --url "$URL" --ping --timeout-ms 20000 --tls-ca "$TMP/cert.pem" \
    --tls-server-name localhost || fail "TLS server did not answer a ping"
  "$BIN" query --url "$URL" --ping 2> "$TMP/err"
  rc=$?
  [ $rc -eq 2 ] || fail "tls without --tls-ca: exit $rc, want 2"
  [ "$(cat "$TMP/err")" = "flashtrie query: $URL: give --tls-ca F to verify the server, or --tls-insecure to connect without verifying it" ] ||
    fail "tls without --tls-ca: '$(cat "$TMP/err")'"
  "$BIN" query --url "$URL" --ping --tls-insecure 2> "$TMP/err" || fail "--tls-insecure ping: $(cat "$TMP/err")"
  [ "$(cat "$TMP/err")" = "flashtrie query: warning: --tls-insecure: the server's certificate is not verified" ] ||
    fail "--tls-insecure warning: '$(cat "$TMP/err")'"
  "$BIN" query --url "$URL" --tls-ca "$TMP/cert.pem" --tls-server-name localhost \
    < "$DATA/cli_requests.jsonl" > "$TMP/got.jsonl" || fail "query over TLS"
  "$BIN" search --index "$TMP/small.fti" --engine cpu < "$DATA/cli_requests.jsonl" > "$TMP/want.jsonl"
  cmp -s "$TMP/got.jsonl" "$TMP/want.jsonl" || fail "TLS: output differs from search"
  t0=$(date +%s%N)
  "$BIN" query --url "$URL" --ping --timeout-ms 10000 --tls-ca "$TMP/cert.pem" \
    --tls-server-name not-this-host 2> "$TMP/err"
  rc=$?
  ms=$((($(date +%s%N) - t0) / 1000000))
  [ $rc -eq 1 ] || fail "wrong server name: exit $rc, want 1"
  [ $ms -lt 8000 ] || fail "wrong server name: took $ms ms"
  [ "$(cat "$TMP/err")" = "flashtrie query: ping: $URL: TLS handshake with $HOST failed (the server's certificate was not accepted, or the peer does not speak TLS)" ] ||
    fail "wrong server name: '$(cat "$TMP/err")'"
  "$BIN" query --url "$URL" --tls-ca "$TMP/cert.pem" --tls-server-name not-this-host \
    < "$DATA/cli_requests.jsonl" > /dev/null 2> "$TMP/err"
  [ $? -eq 1 ] || fail "wrong server name (query): want exit 1"
  [ "$(cat "$TMP/err")" = "flashtrie query: $URL: TLS handshake with $HOST failed: Cryptographic error (the server's certificate was not accepted, or the peer does not speak TLS)" ] ||
    fail "wrong server name (query): '$(cat "$TMP/err")'"
  kill -TERM "$PID"; wait "$PID"; PID=
else
  echo "query_test: openssl not installed; the TLS checks skipped"
fi
echo "query_test: ok"
