#!/usr/bin/python3
"""Two `dflash serve` replicas behind nginx, configured by the shipped deploy/nginx/dflash.conf
(only its ports and log path are replaced), and one replica killed mid-run.

Checks: requests with one X-Session-Id always reach the same replica and different ids use
both; then, with a stream running and a request queued on one replica, that replica is
SIGKILLed: both get a clean error (a 502, a cut stream) within seconds, every other request
(running on the other replica, or new, including sessions that hashed to the dead replica)
is answered 200, and nothing hangs; past fail_timeout, a POST that the dead replica's port
refuses goes on to the live one. nginx runs as an ordinary user process in a temporary
prefix; without nginx the test fails (scripts/install-deps.sh installs it).
"""
import http.client
import json
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time

from harness import BIN, SRC, check, finish

DEADLINE_S = 120        # the whole test; a watchdog kills everything past it
CLIENT_TIMEOUT_S = 30   # every socket operation of every client call
ERROR_WITHIN_S = 10     # the in-flight requests of the killed replica must fail within this

procs = []              # everything this test started, killed in the finally block


def stop_all():
    for p in reversed(procs):
        if p.poll() is None:
            p.terminate()
    for p in reversed(procs):
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def on_deadline():
    print(f"FAIL the test ran past its {DEADLINE_S} s deadline (something hangs)", flush=True)
    stop_all()
    os._exit(1)


def find_nginx():
    # /usr/sbin is not on every user's PATH.
    return shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx", "/usr/bin/nginx") if os.access(p, os.X_OK)), None)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Replica:
    """One `dflash serve` on a free loopback port; its stderr is drained so it never blocks."""

    def __init__(self):
        # One slot per replica, so that a request waits in its queue at the kill.
        self.proc = subprocess.Popen([BIN, "serve", "--host", "127.0.0.1", "--port", "0", "--threads", "1",
                                      "--parallel", "1"],
                                     cwd=SRC, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        procs.append(self.proc)
        self.log = []
        self.port = None
        self._listening = threading.Event()
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self):
        for line in self.proc.stderr:
            self.log.append(line.rstrip("\n"))
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                self._listening.set()

    def wait_ready(self, timeout=60):
        if not self._listening.wait(timeout):
            raise RuntimeError("no listening line:\n" + "\n".join(self.log))
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                if call("GET", "/health", port=self.port, timeout=2)[0] == 200:
                    return
            except OSError:
                pass
            if self.proc.poll() is not None:
                raise RuntimeError("replica exited:\n" + "\n".join(self.log))
            time.sleep(0.05)
        raise RuntimeError("/health not 200 in time")

    def stats(self):
        return json.loads(call("GET", "/v1/stats", port=self.port, timeout=5)[2])


def call(method, path, body=None, sid=None, port=None, timeout=CLIENT_TIMEOUT_S):
    """One request; returns (status, replica port that answered or None, body bytes)."""
    c = http.client.HTTPConnection("127.0.0.1", port or NGINX_PORT, timeout=timeout)
    try:
        headers = {"Content-Type": "application/json"}
        if sid:
            headers["X-Session-Id"] = sid
        c.request(method, path, json.dumps(body) if body is not None else None, headers)
        r = c.getresponse()
        return r.status, upstream_port(r), r.read()
    finally:
        c.close()


def upstream_port(resp):
    # "A" or, after a failover, "A, B": the last one answered.
    v = resp.getheader("X-Dflash-Upstream") or ""
    return int(v.split(",")[-1].strip().rsplit(":", 1)[1]) if ":" in v else None


def chat(max_tokens, stream=False):
    return {"model": "default", "messages": [{"role": "user", "content": "def add(a, b):"}],
            "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True, "stream": stream}


class Stream:
    """A streamed chat request read in a thread. outcome: 'done' ([DONE] and the chunked body's
    last chunk), 'cut' (the body broke off: the client library raises), 'no [DONE]' (a whole
    body without [DONE], a truncation a client could miss), 'timeout', or 'status N'."""

    def __init__(self, sid, max_tokens):
        self.sid, self.max_tokens = sid, max_tokens
        self.port = None
        self.chunks = 0
        self.outcome = self.error = self.ended_at = None
        self.first_chunk = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        c = http.client.HTTPConnection("127.0.0.1", NGINX_PORT, timeout=CLIENT_TIMEOUT_S)
        try:
            c.request("POST", "/v1/chat/completions", json.dumps(chat(self.max_tokens, True)),
                      {"Content-Type": "application/json", "X-Session-Id": self.sid})
            r = c.getresponse()
            self.port = upstream_port(r)
            if r.status != 200:
                r.read()
                self.outcome = f"status {r.status}"
                return
            # read1, not readline: http.client's readline swallows a broken chunked body as
            # an end (its peek ignores IncompleteRead); read1 raises it, as SSE clients do.
            done, buf = False, b""
            while True:
                data = r.read1(65536)
                if not data:
                    break
                buf += data
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    if line.startswith(b"data: [DONE]"):
                        done = True
                    elif line.startswith(b"data: "):
                        self.chunks += 1
                        self.first_chunk.set()
            self.outcome = "done" if done else "no [DONE]"
        except socket.timeout:
            self.outcome = "timeout"
        except (http.client.HTTPException, OSError) as e:
            self.outcome, self.error = "cut", repr(e)  # IncompleteRead, a reset: the stream failed
        finally:
            self.ended_at = time.monotonic()
            self.first_chunk.set()
            c.close()


class Call:
    """A non-streamed request in a thread; status None with error set when it raised."""

    def __init__(self, sid, max_tokens):
        self.status = self.port = self.body = self.error = self.ended_at = None
        self.thread = threading.Thread(target=self._run, args=(sid, max_tokens), daemon=True)
        self.thread.start()

    def _run(self, sid, max_tokens):
        try:
            self.status, self.port, self.body = call("POST", "/v1/chat/completions", chat(max_tokens), sid)
        except (http.client.HTTPException, OSError) as e:
            self.error = repr(e)
        self.ended_at = time.monotonic()


def nginx_conf(tmp, a, b, port):
    """The shipped example with its two replica ports, listen port and log path replaced, inside
    a minimal main config whose pid, logs and temp files all live in tmp."""
    with open(os.path.join(SRC, "deploy", "nginx", "dflash.conf")) as f:
        src = f.read()
    subs = [(r"server 127\.0\.0\.1:8006 ", f"server 127.0.0.1:{a} "),
            (r"server 127\.0\.0\.1:8007 ", f"server 127.0.0.1:{b} "),
            (r"listen 127\.0\.0\.1:8080;", f"listen 127.0.0.1:{port};"),
            (r"/var/log/nginx/", tmp + "/")]
    for pattern, repl in subs:
        src, n = re.subn(pattern, repl, src)
        if n != 1:  # the example changed shape: fail rather than test something else
            raise RuntimeError(f"deploy/nginx/dflash.conf: {pattern!r} matched {n} times, not once")
    with open(os.path.join(tmp, "dflash.conf"), "w") as f:
        f.write(src)
    temp = "\n".join(f"    {k}_temp_path {tmp}/{k}_temp;" for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    with open(os.path.join(tmp, "nginx.conf"), "w") as f:
        f.write(f"worker_processes 1;\npid {tmp}/nginx.pid;\nerror_log {tmp}/error.log info;\n"
                f"events {{ worker_connections 512; }}\n"
                f"http {{\n{temp}\n    access_log off;\n    include {tmp}/dflash.conf;\n}}\n")
    return os.path.join(tmp, "nginx.conf")


NGINX_PORT = None
watchdog = threading.Timer(DEADLINE_S, on_deadline)
watchdog.daemon = True
watchdog.start()
tmpdir = tempfile.mkdtemp(prefix="dflash-nginx-")
try:
    nginx = find_nginx()
    if not nginx:
        check("nginx is installed", False, "no nginx binary: install Debian's nginx (scripts/install-deps.sh)")
        raise SystemExit
    # nginx runs as an ordinary user: as this user, or as nobody when the test runs as root.
    prefix = os.path.join(tmpdir, "nginx")
    os.mkdir(prefix)
    as_user = None
    if os.geteuid() == 0:
        nobody = pwd.getpwnam("nobody")
        os.chmod(tmpdir, 0o711)
        os.chown(prefix, nobody.pw_uid, nobody.pw_gid)
        as_user = (nobody.pw_uid, nobody.pw_gid)

    t0 = time.monotonic()
    replicas = [Replica(), Replica()]
    for r in replicas:
        r.wait_ready()
    ports = [r.port for r in replicas]
    user_kw = {"user": as_user[0], "group": as_user[1], "extra_groups": []} if as_user else {}
    error_log = os.path.join(prefix, "error.log")
    for attempt in range(3):  # the free port may be taken before nginx binds it: pick another
        NGINX_PORT = free_port()
        conf = nginx_conf(prefix, ports[0], ports[1], NGINX_PORT)
        if as_user:
            for name in os.listdir(prefix):
                os.chown(os.path.join(prefix, name), *as_user)
        ncmd = [nginx, "-p", prefix, "-e", error_log, "-c", conf, "-g", "daemon off;"]
        if attempt == 0:
            t = subprocess.run(ncmd + ["-t"], capture_output=True, text=True, timeout=30, **user_kw)
            if not check("nginx -t accepts the shipped config", t.returncode == 0, t.stderr):
                raise SystemExit
        nproc = subprocess.Popen(ncmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL, **user_kw)
        procs.append(nproc)
        end, ready = time.monotonic() + 10, False
        while not ready and nproc.poll() is None and time.monotonic() < end:
            try:
                ready = call("GET", "/health", timeout=2)[0] == 200
            except OSError:
                pass
            if not ready:
                time.sleep(0.05)
        if ready:
            break
        nproc.kill()
        nproc.wait()
    else:
        raise RuntimeError("nginx did not come up:\n" + open(error_log).read())
    print(f"replicas on {ports}, nginx on {NGINX_PORT} (ready after {time.monotonic() - t0:.1f} s)", flush=True)

    # (a) Affinity: one session id, one replica; different ids spread over both.
    sids = [f"conv-{i}" for i in range(16)]
    home, sticky, ok200 = {}, True, True
    for rnd in range(3):
        for s in sids:
            st, port, _ = call("POST", "/v1/chat/completions", chat(2), s)
            ok200 &= st == 200
            if rnd == 0:
                home[s] = port
            sticky &= port == home[s]
    check("48 short requests through nginx answered 200", ok200)
    check("each session id went to the same replica all 3 times", sticky, str(home))
    check("the session ids use both replicas", set(home.values()) == set(ports), str(home))
    anon = {call("POST", "/v1/chat/completions", chat(2))[1] for _ in range(3)}
    check("requests without X-Session-Id stick to one replica (the address is the key)", len(anon) == 1, str(anon))

    # (b) Kill one replica while a stream runs on it and a request waits in its queue.
    # The victim is the replica with more sessions, so that it has the three this part uses.
    by_port = lambda r: sum(p == r.port for p in home.values())
    victim, live = sorted(replicas, key=by_port, reverse=True)
    on_victim = [s for s in sids if home[s] == victim.port]
    on_live = [s for s in sids if home[s] == live.port] * 2  # at least two, even if one id
    # On each replica a long stream, and once it runs, a request queued behind it (a replica
    # generates one request at a time); the live one's first, as it must outlast the kill.
    def stream_and_queued(replica, sid_stream, sid_call, call_tokens):
        st = Stream(sid_stream, 3000)
        st.first_chunk.wait(CLIENT_TIMEOUT_S)
        ca = Call(sid_call, call_tokens)
        end = time.monotonic() + 10
        while replica.stats()["queue_depth"] < 1 and time.monotonic() < end:
            time.sleep(0.01)
        busy = st.port == replica.port and st.ended_at is None and replica.stats()["queue_depth"] >= 1
        return st, ca, busy

    live_stream, live_call, live_busy = stream_and_queued(live, on_live[0], on_live[1], 50)
    doomed_stream, doomed_call, victim_busy = stream_and_queued(victim, on_victim[0], on_victim[1], 3000)
    t_kill = time.monotonic()
    victim.proc.send_signal(signal.SIGKILL)
    victim.proc.wait(timeout=10)
    print(f"killed replica {victim.port} with a stream of {doomed_stream.chunks} chunks running", flush=True)
    check("the victim had a stream running and a request queued at the kill", victim_busy,
          f"stream on {doomed_stream.port}, outcome {doomed_stream.outcome}")
    check("the live replica had a stream running and a request queued at the kill",
          live_busy and live_stream.ended_at is None, f"stream on {live_stream.port}, outcome {live_stream.outcome}")

    # Right away: new requests for every session, those of the dead replica included.
    after = [(s, *call("POST", "/v1/chat/completions", chat(2), s)[:2]) for s in sids]
    check("after the kill every new request is answered 200", all(st == 200 for _, st, _ in after),
          str([(s, st) for s, st, _ in after if st != 200]))
    check("the dead replica's sessions went to the live one", all(p == live.port for _, _, p in after), str(after))
    moved = Stream(on_victim[2], 20)
    moved.thread.join(CLIENT_TIMEOUT_S)
    check("a new stream for a dead replica's session completes on the live one",
          moved.outcome == "done" and moved.port == live.port, f"{moved.outcome} on {moved.port}")

    for x in (doomed_stream, doomed_call):
        x.thread.join(max(0.0, t_kill + ERROR_WITHIN_S - time.monotonic()))
    check(f"the running stream on the killed replica is cut within {ERROR_WITHIN_S} s",
          doomed_stream.outcome == "cut", f"outcome {doomed_stream.outcome} after {doomed_stream.chunks} chunks")
    if doomed_stream.ended_at:
        print(f"the cut stream raised {doomed_stream.error} after {doomed_stream.chunks} chunks,"
              f" {doomed_stream.ended_at - t_kill:.2f} s after the kill", flush=True)
    check(f"the queued request on the killed replica gets 502 within {ERROR_WITHIN_S} s",
          doomed_call.status == 502, f"status {doomed_call.status}, error {doomed_call.error}")
    try:
        code = json.loads(doomed_call.body)["error"]["code"]
    except (TypeError, ValueError, KeyError):
        code = None
    check("the 502 is an OpenAI-shaped JSON error", code == "bad_gateway", str(doomed_call.body))
    for x in (live_stream, live_call):
        x.thread.join(CLIENT_TIMEOUT_S)
    check("the stream running on the live replica completes", live_stream.outcome == "done"
          and live_stream.port == live.port, f"{live_stream.outcome} on {live_stream.port}")
    check("the request queued on the live replica is answered 200", live_call.status == 200
          and live_call.port == live.port, f"{live_call.status} on {live_call.port}, {live_call.error}")
    # Past fail_timeout (10 s) nginx gives the dead replica one request again. Its port refuses
    # the connection, the POST was never sent, so nginx passes it on to the live replica.
    time.sleep(max(0.0, t_kill + 12 - time.monotonic()))
    c = http.client.HTTPConnection("127.0.0.1", NGINX_PORT, timeout=CLIENT_TIMEOUT_S)
    c.request("POST", "/v1/chat/completions", json.dumps(chat(2)),
              {"Content-Type": "application/json", "X-Session-Id": on_victim[0]})
    r = c.getresponse()
    r.read()
    c.close()
    tried = r.getheader("X-Dflash-Upstream")
    check("past fail_timeout a refused POST fails over to the live replica", r.status == 200
          and tried == f"127.0.0.1:{victim.port}, 127.0.0.1:{live.port}", f"{r.status}, tried {tried}")
    check("nginx and the live replica are still up", nproc.poll() is None and live.proc.poll() is None
          and call("GET", "/health")[0] == 200)
    print(f"done after {time.monotonic() - t0:.1f} s; nginx's error log:", flush=True)
    with open(error_log) as f:  # what nginx saw of the kill: premature closes, refused connects
        print("".join(line for line in f if "[error]" in line or "[warn]" in line), flush=True)
except SystemExit:
    pass
except Exception as e:  # a setup failure is a failed check, with the error, not a traceback alone
    check("the test ran to the end", False, repr(e))
finally:
    stop_all()
    shutil.rmtree(tmpdir, ignore_errors=True)
finish()
