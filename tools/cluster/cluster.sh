#!/usr/bin/env bash
# A real Kubernetes control plane on loopback, for the charts' cluster test
# (charts/cluster_test.go) and for a shell: etcd, kube-apiserver,
# kube-controller-manager and kube-scheduler, and kwok, whose fake node gets
# pods scheduled and reported Running without a container runtime (no
# container ever runs). Everything is built from the Go module proxy, pinned
# by the scratch modules beside this script (kubernetes/, etcd/, kwok/),
# once per machine into $ESIM_TOOLS_CACHE (~/.cache/esim-tools), keyed by
# those pins, as tilt/helm.sh does for helm.
#
# usage:
#   tools/cluster/cluster.sh build
#       build the binaries (once per machine) and print their directories
#   tools/cluster/cluster.sh start DIR [--owner PID] [--context NAME]
#       start a control plane whose state and logs live in DIR, wait until
#       the API is ready and the kwok node is Ready, and print the path of
#       its kubeconfig (DIR/kubeconfig). It keeps running until `stop DIR`,
#       or until process PID exits when --owner is given (what a test that
#       may be killed before its cleanup runs wants). --context names the
#       kubeconfig's context (default esim-loopback).
#   tools/cluster/cluster.sh stop DIR
#       stop it and remove what start wrote in DIR (DIR too, if then empty)
#   tools/cluster/cluster.sh kubectl DIR ARGS...
#       the pinned kubectl against that control plane
#
# Every port is picked free at start (never a fixed one), so several
# control planes, and whatever else the machine runs, coexist.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
self="$here/$(basename "$0")"
cache="${ESIM_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/esim-tools}"

die() { echo "cluster.sh: $*" >&2; exit 1; }

# --- build ------------------------------------------------------------------

# The recipes, one per scratch module. Each writes its binaries into $1.
# They are part of the cache key (see bindir), so changing one rebuilds.
build_kubernetes() {
  local out=$1 version minor
  version=$(GOWORK=off go list -m -f '{{.Version}}' k8s.io/kubernetes) # v1.MINOR.PATCH
  minor=$(echo "$version" | cut -d. -f2)
  # Built from source, the binaries call themselves v0.0.0 unless stamped,
  # and helm then refuses charts that name a kubeVersion.
  local ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$version
    -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor
    -X k8s.io/component-base/version.gitTreeState=clean"
  # One go build for the four: their shared packages compile once, and the
  # links run side by side.
  GOWORK=off go build -trimpath -ldflags "$ldflags" -o "$out/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl
}
build_etcd() {
  # The server module's main package; `go install ...@version` is refused
  # because of the replace directives in etcd's own go.mod.
  GOWORK=off go build -trimpath -ldflags "-s -w" -o "$1/etcd" go.etcd.io/etcd/server/v3
}
build_kwok() {
  GOWORK=off go build -trimpath -ldflags "-s -w" -o "$1/kwok" sigs.k8s.io/kwok/cmd/kwok
}

# bindir MODULE: where MODULE's binaries are cached, named by its main
# dependency's version and keyed by its go.mod, go.sum, recipe and Go
# release, so every clone on the machine shares one build of each pin.
declare -A main_dep=([kubernetes]=k8s.io/kubernetes [etcd]=go.etcd.io/etcd/server/v3 [kwok]=sigs.k8s.io/kwok)
bindir() {
  local m=$1 version key
  version=$(cd "$here/$m" && GOWORK=off go list -m -f '{{.Version}}' "${main_dep[$m]}")
  key=$(cat "$here/$m/go.mod" "$here/$m/go.sum" <(declare -f "build_$m") | sha256sum | cut -c1-16)
  echo "$cache/cluster-$m-$version-$key-$(go env GOVERSION)"
}

# ensure_built: builds what is missing, each module once per machine even
# when several runs ask at once (the second waits for the first's build).
declare -A bin=()
ensure_built() {
  mkdir -p "$cache"
  for m in etcd kwok kubernetes; do
    local dir
    dir=$(bindir "$m")
    if [ ! -e "$dir/.stamp" ]; then
      (
        flock 9
        if [ ! -e "$dir/.stamp" ]; then
          echo "building the $m control-plane binaries into $dir (once per machine; kubernetes takes several minutes)" >&2
          rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
          (cd "$here/$m" && "build_$m" "$dir.tmp")
          touch "$dir.tmp/.stamp"
          rm -rf "$dir" && mv "$dir.tmp" "$dir"
        fi
      ) 9>"$cache/cluster-$m.lock"
    fi
    bin[$m]=$dir
  done
}

# --- start ------------------------------------------------------------------

# free_port: a random port nothing listens on, outside Linux's ephemeral
# range (32768-60999) so that no outgoing connection holds it either. A
# process may still take it before ours binds it: start retries then.
declare -A taken=()
free_port() {
  local p
  while :; do
    p=$((20000 + RANDOM % 12000))
    [ -z "${taken[$p]:-}" ] || continue
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      taken[$p]=1
      echo "$p"
      return
    fi
  done
}

# launch NAME CMD...: starts CMD in its own session (a terminal's hangup or
# Ctrl-C does not reach it), with no descriptor of ours left open (a caller
# reading our output, like Go's exec, would otherwise wait for it to exit),
# and records its pid.
launch() {
  local name=$1
  shift
  setsid "$@" </dev/null >"$dir/logs/$name.log" 2>&1 &
  echo "$! $name" >>"$dir/cluster.pids"
}

# alive NAME: whether the process launched as NAME still runs.
alive() {
  local pid
  pid=$(awk -v n="$1" '$2 == n { print $1 }' "$dir/cluster.pids" | tail -1)
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

# wait_for WHAT NAME SECONDS CMD...: polls CMD until it succeeds, failing
# at once if process NAME exits (its log says why) and after SECONDS.
# These are other processes' states, with nothing to block on.
wait_for() {
  local what=$1 name=$2 deadline=$(($(date +%s) + $3))
  shift 3
  until "$@" >/dev/null 2>&1; do
    if ! alive "$name"; then
      echo "cluster.sh: $name exited while waiting for $what; the end of $dir/logs/$name.log:" >&2
      tail -n 30 "$dir/logs/$name.log" >&2
      return 1
    fi
    if [ "$(date +%s)" -ge "$deadline" ]; then
      echo "cluster.sh: timed out waiting for $what; the end of $dir/logs/$name.log:" >&2
      tail -n 30 "$dir/logs/$name.log" >&2
      return 1
    fi
    sleep 0.2
  done
}

# A process that lost its port to another between free_port and its bind.
lost_port() { grep -qi 'address already in use' "$dir/logs/$1.log" 2>/dev/null; }

kubectl_() { KUBECONFIG="$dir/kubeconfig" "${bin[kubernetes]}/kubectl" "$@"; }
node_ready() {
  [ "$(kubectl_ get node kwok-node-0 -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]
}

certificates() {
  local pki=$dir/pki
  mkdir -p "$pki"
  # A CA of this control plane's own, and the API server's certificate for
  # the loopback names, so clients verify it instead of skipping TLS checks.
  openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=esim-loopback-ca" \
    -keyout "$pki/ca.key" -out "$pki/ca.crt" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj "/CN=kube-apiserver" \
    -keyout "$pki/apiserver.key" -out "$pki/apiserver.csr" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc\nextendedKeyUsage=serverAuth\n' >"$pki/apiserver.ext"
  openssl x509 -req -in "$pki/apiserver.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
    -days 30 -extfile "$pki/apiserver.ext" -out "$pki/apiserver.crt" 2>/dev/null
  # Signs service-account tokens.
  openssl genrsa -out "$pki/sa.key" 2048 2>/dev/null
  openssl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
  # One static bearer token with cluster-admin rights (system:masters), for
  # every client: the test, helm, the controllers.
  token=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
  echo "$token,admin,admin,system:masters" >"$pki/tokens.csv"
  chmod 600 "$pki"/*.key "$pki/tokens.csv"
}

# Only its owner may read it: it holds the cluster-admin token.
write_kubeconfig() (
  umask 077
  cat >"$dir/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: $context
  cluster:
    server: https://127.0.0.1:$api_port
    certificate-authority: $dir/pki/ca.crt
users:
- name: $context-admin
  user:
    token: $token
contexts:
- name: $context
  context:
    cluster: $context
    user: $context-admin
current-context: $context
EOF
)

# etcd and the API server, on fresh ports; returns 2 when one lost its
# port to another process (then start tries again on other ports).
start_storage_and_api() {
  local etcd_client etcd_peer
  etcd_client=$(free_port)
  etcd_peer=$(free_port)
  api_port=$(free_port)
  rm -rf "$dir/etcd"
  # --unsafe-no-fsync: the data lives as long as the test; fsyncs would only
  # make the shared disk slower for everyone.
  launch etcd "${bin[etcd]}/etcd" --name esim --data-dir "$dir/etcd" \
    --listen-client-urls "http://127.0.0.1:$etcd_client" --advertise-client-urls "http://127.0.0.1:$etcd_client" \
    --listen-peer-urls "http://127.0.0.1:$etcd_peer" --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer" \
    --initial-cluster "esim=http://127.0.0.1:$etcd_peer" --initial-cluster-state new \
    --unsafe-no-fsync --log-level warn
  if ! wait_for "etcd to serve" etcd 60 curl -fsS "http://127.0.0.1:$etcd_client/health"; then
    lost_port etcd && return 2
    return 1
  fi

  # The service-cluster range only numbers Services; nothing routes it.
  # Privileged pods are allowed, as on a kubeadm cluster: what refuses them
  # is a namespace's Pod Security level. No endpoint reconciler: a loopback
  # address cannot be the kubernetes Service's endpoint.
  launch kube-apiserver "${bin[kubernetes]}/kube-apiserver" \
    --etcd-servers "http://127.0.0.1:$etcd_client" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$api_port" \
    --tls-cert-file "$dir/pki/apiserver.crt" --tls-private-key-file "$dir/pki/apiserver.key" \
    --token-auth-file "$dir/pki/tokens.csv" --authorization-mode RBAC \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$dir/pki/sa.pub" --service-account-signing-key-file "$dir/pki/sa.key" \
    --service-cluster-ip-range 10.96.0.0/16 --endpoint-reconciler-type none \
    --allow-privileged=true --profiling=false
  write_kubeconfig
  # /readyz includes etcd and the bootstrap of the built-in RBAC roles
  # and priority levels, which every later request needs.
  if ! wait_for "the API server to be ready" kube-apiserver 120 kubectl_ get --raw /readyz; then
    lost_port kube-apiserver && return 2
    return 1
  fi
}

start() {
  [ $# -ge 1 ] || die "usage: cluster.sh start DIR [--owner PID] [--context NAME]"
  dir=$1
  shift
  local owner=""
  context=esim-loopback
  while [ $# -gt 0 ]; do
    case $1 in
      --owner) owner=$2; shift 2 ;;
      --context) context=$2; shift 2 ;;
      *) die "unknown option $1" ;;
    esac
  done
  command -v openssl >/dev/null || die "openssl is missing (Debian: apt-get install openssl)"
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  if [ -e "$dir/cluster.pids" ]; then
    if any_alive; then die "$dir holds a running control plane: cluster.sh stop $dir first"; fi
    cleanup_files
  fi
  ensure_built
  mkdir -p "$dir/logs"
  : >"$dir/cluster.pids"
  # From here on, a failure (or Ctrl-C) leaves nothing running.
  started=
  trap '[ -n "$started" ] || stop_processes' EXIT
  trap 'exit 1' INT TERM
  if [ -n "$owner" ]; then
    # Stops the control plane when its owner exits, however it ends (a test
    # killed by its timeout runs no cleanup), even while starting it.
    # tail --pid blocks until then.
    launch watchdog bash -c 'tail --pid="$1" -f /dev/null; exec "$0" stop "$2"' "$self" "$owner" "$dir"
  fi

  certificates
  local attempt rc
  for attempt in 1 2 3 4 5; do
    rc=0
    start_storage_and_api || rc=$?
    [ "$rc" = 2 ] || break
    echo "cluster.sh: a port was taken meanwhile; trying others (attempt $attempt)" >&2
    stop_processes etcd kube-apiserver
  done
  [ "$rc" = 0 ] || exit 1

  # No HTTPS port for the controllers (--secure-port 0): nothing here
  # scrapes or probes them, and it is two ports fewer to find free.
  launch kube-controller-manager "${bin[kubernetes]}/kube-controller-manager" \
    --kubeconfig "$dir/kubeconfig" --leader-elect=false --secure-port 0 \
    --service-account-private-key-file "$dir/pki/sa.key" --root-ca-file "$dir/pki/ca.crt" \
    --profiling=false
  launch kube-scheduler "${bin[kubernetes]}/kube-scheduler" \
    --kubeconfig "$dir/kubeconfig" --leader-elect=false --secure-port 0 --profiling=false
  # HOME: kwok also loads ~/.kwok/kwok.yaml when there is one, and a
  # developer's own must not change this control plane. Pod IPs are in
  # 198.18.0.0/15, the benchmarking range nothing routes, never one of the
  # machine's networks; loopback ones would do too, but EndpointSlices
  # refuse them, and the controller-manager logs so without end. Without a
  # node lease kwok reports the node's status only every ~50 s, the
  # controller-manager's grace period, so the node would flap NotReady
  # about once a minute and take every pod's readiness with it.
  mkdir -p "$dir/kwok"
  launch kwok env HOME="$dir/kwok" "${bin[kwok]}/kwok" \
    --kubeconfig "$dir/kubeconfig" --manage-all-nodes=true \
    --cidr 198.18.0.1/16 --node-ip 127.0.0.2 --node-lease-duration-seconds 40

  # The one node, which kwok keeps Ready and whose pods it marks Running.
  kubectl_ apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Node
metadata:
  name: kwok-node-0
  annotations:
    kwok.x-k8s.io/node: fake
    node.alpha.kubernetes.io/ttl: "0"
  labels:
    kubernetes.io/hostname: kwok-node-0
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    type: kwok
EOF
  wait_for "the kwok node to be Ready" kwok 120 node_ready
  # Pods are admitted only once the default ServiceAccount exists in their
  # namespace, which the controller-manager creates.
  wait_for "the controller-manager to create the default ServiceAccount" kube-controller-manager 120 \
    kubectl_ get serviceaccount default --namespace default

  started=1
  echo "$dir/kubeconfig"
}

# --- stop -------------------------------------------------------------------

# ours PID: whether PID is still a process this control plane started (each
# names DIR on its command line), not another that took a reused pid.
ours() { [ -r "/proc/$1/cmdline" ] && tr '\0' ' ' <"/proc/$1/cmdline" | grep -qF "$dir"; }

any_alive() {
  local pid name
  while read -r pid name; do
    ours "$pid" && return 0
  done <"$dir/cluster.pids"
  return 1
}

# stop_processes [NAME...]: TERM to each process (or only those launched
# as NAME), all at once (each takes a second or two to exit, and the order
# does not matter for a control plane about to be thrown away), then KILL
# to what has not exited within 20 seconds; they are then forgotten.
stop_processes() {
  [ -e "$dir/cluster.pids" ] || return 0
  local pid name pids=() keep=()
  while read -r pid name; do
    if [ $# -gt 0 ] && [[ " $* " != *" $name "* ]]; then
      keep+=("$pid $name")
      continue
    fi
    # The watchdog, when it is what runs this stop.
    [ "$pid" != "$$" ] || continue
    if ours "$pid"; then pids=("$pid" "${pids[@]}"); fi
  done <"$dir/cluster.pids"
  # Each was launched as the leader of its own process group: the group
  # goes, with any child (the watchdog's tail).
  for pid in "${pids[@]}"; do
    kill -TERM -- "-$pid" 2>/dev/null || true
  done
  for pid in "${pids[@]}"; do
    timeout 20 tail --pid="$pid" -s 0.1 -f /dev/null || kill -KILL -- "-$pid" 2>/dev/null || true
  done
  printf '%s\n' "${keep[@]}" | grep . >"$dir/cluster.pids" || true
}

cleanup_files() {
  rm -rf "$dir/etcd" "$dir/pki" "$dir/kwok" "$dir/logs" "$dir/kubeconfig" "$dir/cluster.pids"
}

stop() {
  [ $# -eq 1 ] || die "usage: cluster.sh stop DIR"
  [ -d "$1" ] || return 0
  dir=$(cd "$1" && pwd)
  [ -e "$dir/cluster.pids" ] || return 0
  stop_processes
  cleanup_files
  rmdir "$dir" 2>/dev/null || true
}

case "${1:-}" in
  build)
    ensure_built
    printf '%s\n' "${bin[@]}"
    ;;
  start) shift; start "$@" ;;
  stop) shift; stop "$@" ;;
  kubectl)
    [ $# -ge 2 ] || die "usage: cluster.sh kubectl DIR ARGS..."
    dir=$(cd "$2" && pwd)
    shift 2
    ensure_built
    kubectl_ "$@"
    ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
esac
