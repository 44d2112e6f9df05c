#!/usr/bin/env bash
# The Kubernetes manifest of the shared tier (mount/boundfs-daemonset.yaml)
# is valid against the Kubernetes schemas, checked offline (no network
# namespace access at all) by kubernetes-validate --strict (PyPI, pinned in
# scripts/install-deps.sh; it bundles the schemas), and says what the README
# promises: a privileged boundfs -o shared per node with Bidirectional
# propagation of its mountpoint, and an engine mounting that host path.
. "$(dirname "$0")/lib.sh"

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
PY
bfs_done
