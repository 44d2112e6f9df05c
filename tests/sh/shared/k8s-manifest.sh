#!/usr/bin/env bash
# The Kubernetes manifest of the shared tier (mount/boundfs-daemonset.yaml)
# is valid against the Kubernetes schemas, checked offline (no network
# namespace access at all) by kubernetes-validate --strict (PyPI, pinned in
# scripts/install-deps.sh; it bundles the schemas), and says what the README
# promises: a privileged boundfs -o shared per node with Bidirectional
# propagation of its mountpoint, its /metrics port declared and annotated for
# Prometheus, and an engine mounting that host path.
. "$(dirname "$0")/../lib.sh"

KV=${SHARED_VENV:-/opt/boundfs-shared}/bin/kubernetes-validate
[ -x "$KV" ] || skip "kubernetes-validate is missing at $KV (scripts/install-deps.sh installs it)"
M="$BFS_REPO/mount/boundfs-daemonset.yaml"
offline=()
unshare --net true 2>/dev/null && offline=(unshare --net)

out=$("${offline[@]}" "$KV" --strict "$M" 2>&1) || fail "the manifest does not validate: $out"
log "$(printf '%s\n' "$out" | grep -c passed) resources valid (Kubernetes $("$KV" --version 2>&1 | tail -n 1))"
# the validator really rejects a bad manifest (strict: unknown field)
sed 's/mountPropagation: Bidirectional/mountPropagaton: Bidirectional/' "$M" >"$BFS_TMP/bad.yaml"
"${offline[@]}" "$KV" --strict "$BFS_TMP/bad.yaml" >/dev/null 2>&1 && fail "a misspelt field was not rejected"

"$(dirname "$KV")/python" - "$M" <<'PY' || fail "the manifest does not say what the README promises"
import sys, yaml
docs = {d["kind"]: d for d in yaml.safe_load_all(open(sys.argv[1]))}
ds = docs["DaemonSet"]["spec"]["template"]["spec"]
c = ds["containers"][0]
assert c["securityContext"]["privileged"] is True, "boundfs must be privileged"
assert any("shared" in a.split(",") for a in " ".join(c["args"]).replace("-o ", "").split()), "boundfs -o shared"
mnt = [m for m in c["volumeMounts"] if m.get("mountPropagation") == "Bidirectional"]
assert mnt, "the mountpoint propagates Bidirectional"
host = {v["name"]: v.get("hostPath", {}).get("path") for v in ds["volumes"]}
path = host[mnt[0]["name"]]
eng = docs["Deployment"]["spec"]["template"]["spec"]
ev = {v["name"]: v.get("hostPath", {}).get("path") for v in eng["volumes"]}
em = eng["containers"][0]["volumeMounts"]
assert any(ev.get(m["name"]) == path and m.get("mountPropagation") == "HostToContainer" for m in em), \
    "the engine mounts the same host path, HostToContainer"
# BACKING is a directory in a new (empty) volume: something makes it before boundfs starts
backing = c["command"][-2]
assert any(backing in " ".join(i.get("command", []) + i.get("args", [])) and "mkdir" in " ".join(i.get("command", []))
           for i in ds.get("initContainers", [])), f"an init container makes {backing} (boundfs refuses a missing BACKING)"
# the engine's block files are what boundfs's pattern selects (LMCache writes *.pt)
opts = " ".join(c["args"])
patterns = [o.split("=", 1)[1] for o in opts.replace("-o ", "").replace(" ", ",").split(",") if o.startswith("pattern=")] or ["*.bin"]
eng_text = yaml.safe_dump(eng)
if "LMCACHE" in eng_text or "LMCache" in eng_text:
    assert "*.pt" in patterns, f"the engine is LMCache (*.pt files) but boundfs selects {patterns}: nothing would be evicted"
if '"type":"fs"' in eng_text.replace(" ", "") or "'type':'fs'" in eng_text.replace(" ", ""):
    assert "*.bin" in patterns, f"vLLM's fs tier writes *.bin but boundfs selects {patterns}"
# /metrics: the port metrics_listen serves is declared and annotated for scraping
listen = [o.split("=", 1)[1] for o in opts.replace("-o ", "").replace(" ", ",").split(",") if o.startswith("metrics_listen=")]
assert listen, "boundfs serves /metrics (-o metrics_listen)"
port = int(listen[0].rsplit(":", 1)[1])
assert any(p.get("containerPort") == port for p in c.get("ports", [])), f"containerPort {port} (metrics_listen) declared"
ann = docs["DaemonSet"]["spec"]["template"]["metadata"].get("annotations", {})
assert ann.get("prometheus.io/scrape") == "true" and ann.get("prometheus.io/port") == str(port), \
    f"the pod's prometheus.io annotations name port {port}"
# the engine waits for the mount (else it writes, unbounded, into the bare host directory)
assert any("fuse.boundfs" in " ".join(i.get("command", [])) for i in eng.get("initContainers", [])), \
    "the engine pod waits for the boundfs mount before it starts"
PY
bfs_done
