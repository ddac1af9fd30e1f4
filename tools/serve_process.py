"""`rocmforge serve` as a child process for the tools that drive it (bench_image_serve.py,
serve_two_workers.py): started on a free port, waited for until /health answers 200, its log copied
to stderr; and JSON posted to it."""
import json
import re
import subprocess
import sys
import threading
import time
import urllib.request


def start(binary, model, extra):
    """The process and its base URL, once it is healthy."""
    server = subprocess.Popen([binary, "serve", "-m", str(model), "--port", "0", *extra], stderr=subprocess.PIPE,
                              text=True)
    for line in server.stderr:
        sys.stderr.write(line)
        found = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
        if found:
            break
    else:
        raise SystemExit(f"serve -m {model} exited before listening")
    # Keeps reading its log, so that the server never blocks on a full pipe.
    threading.Thread(target=lambda: [sys.stderr.write(line) for line in server.stderr], daemon=True).start()
    base = f"http://127.0.0.1:{found.group(1)}"
    for _ in range(3000):
        try:
            with urllib.request.urlopen(base + "/health", timeout=5) as response:
                if response.status == 200:
                    return server, base
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"serve -m {model} did not become healthy")


def post(base, path, body, timeout=600):
    """The JSON answer to a JSON body; urllib's HTTPError for a status other than 2xx."""
    request = urllib.request.Request(base + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read())
