#!/usr/bin/env bash
# bench-tls-fetch.sh OUTDIR LABEL=WEIR_BIN [LABEL=WEIR_BIN ...]
#
# Fetch over TLS against fetch over plaintext: each weir binary given (e.g. before=... after=...)
# and, unless KAFKA=0, Apache Kafka 4.4 (../shared/anchors/kafka/start.sh) run at the same time,
# each with a PLAINTEXT and an SSL listener on 127.0.0.1 and one topic of MESSAGES records of
# 1 KiB in PARTITIONS partitions, written once through the plaintext listener (page-cache
# acknowledgement). Then, REPS times, brokers and listeners alternating, `weir bench consume`
# reads the whole topic through each listener (a new consumer, franz-go) and the broker's CPU
# time (utime+stime from /proc/PID/stat) is read around the read. Prints one line per run:
# broker, listener, MB/s of record values, broker CPU ms, broker CPU µs per MB. The data is in
# the page cache: the figures are of the network path, not the disk.
#
#   REPS        default 3
#   MESSAGES    default 1000000 (1 KiB values: about 1 GB per topic)
#   PARTITIONS  default 6
#   KAFKA       1 (default) to include Apache Kafka; its SSL listener is pinned to
#               TLS_AES_128_GCM_SHA256, the suite Go picks, so the two brokers run the same cipher
#   PORT        first port (default 29300); each broker takes 4
#
# Everything listens on 127.0.0.1 only; every consume is bounded by a timeout. On a shared,
# noisy machine the broker's CPU per MB is the robust figure, not MB/s.
set -euo pipefail
out="${1:?usage: $0 OUTDIR LABEL=WEIR_BIN ...}"
shift
[[ $# -ge 1 ]] || { echo "usage: $0 OUTDIR LABEL=WEIR_BIN ..." >&2; exit 2; }
REPS="${REPS:-3}"
MESSAGES="${MESSAGES:-1000000}"
PARTITIONS="${PARTITIONS:-6}"
KAFKA="${KAFKA:-1}"
PORT="${PORT:-29300}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
anchors="${KAFKA_ANCHORS:-$here/../../shared/anchors/kafka}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
client="${CLIENT_BIN:-${1#*=}}" # the first weir binary is also the load generator
CLK_TCK="$(getconf CLK_TCK)"

# Certificates: a CA and a server certificate for 127.0.0.1 (P-256), the key also as PKCS#8
# with the chain in one file for Kafka's PEM keystore.
if [[ ! -f "$out/ca.pem" ]]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$out/ca.key" \
    -out "$out/ca.pem" -days 30 -subj "/CN=bench-ca" 2>/dev/null
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$out/server.key" \
    -out "$out/server.csr" -subj "/CN=localhost" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >"$out/ext.cnf"
  openssl x509 -req -in "$out/server.csr" -CA "$out/ca.pem" -CAkey "$out/ca.key" -CAcreateserial \
    -out "$out/server.pem" -days 30 -extfile "$out/ext.cnf" 2>/dev/null
  openssl pkcs8 -topk8 -nocrypt -in "$out/server.key" -out "$out/server.pk8"
  cat "$out/server.pk8" "$out/server.pem" >"$out/kafka-keystore.pem"
fi

names=() pids=() plain=() ssl=()
cleanup() {
  local i
  for i in "${!names[@]}"; do
    if [[ "${names[$i]}" == kafka ]]; then
      "$anchors/stop.sh" "$out/kafka" >/dev/null 2>&1 || true
    else
      kill -TERM "${pids[$i]}" 2>/dev/null || true
    fi
  done
  wait 2>/dev/null || true
}
trap cleanup EXIT

wait_port() { # PORT: wait up to 30 s for it to accept
  local i
  for i in $(seq 300); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.1
  done
  echo "port $1 did not open" >&2
  return 1
}

p="$PORT"
for spec in "$@"; do
  label="${spec%%=*}" bin="${spec#*=}"
  rm -rf "$out/$label" && mkdir -p "$out/$label"
  "$bin" serve --set node.id=1 --set "log.dirs=$out/$label/data" \
    --set "listeners=PLAINTEXT://127.0.0.1:$p,SSL://127.0.0.1:$((p + 1))" \
    --set "ssl.certificate.location=$out/server.pem" --set "ssl.key.location=$out/server.key" \
    --set log.flush.interval.messages=9223372036854775807 --set group.initial.rebalance.delay.ms=0 \
    >"$out/$label/serve.log" 2>&1 &
  names+=("$label") pids+=("$!") plain+=("127.0.0.1:$p") ssl+=("127.0.0.1:$((p + 1))")
  wait_port "$p"
  p=$((p + 4))
done
if [[ "$KAFKA" == 1 ]]; then
  kpid="$(KAFKA_CONTROLLER_PORT=$((p + 2)) "$anchors/start.sh" "$p" "$out/kafka" \
    "listeners=PLAINTEXT://127.0.0.1:$p,CONTROLLER://127.0.0.1:$((p + 2)),SSL://127.0.0.1:$((p + 1))" \
    "advertised.listeners=PLAINTEXT://127.0.0.1:$p,SSL://127.0.0.1:$((p + 1))" \
    "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL" \
    "ssl.keystore.type=PEM" "ssl.keystore.location=$out/kafka-keystore.pem" \
    "ssl.enabled.protocols=TLSv1.3" "ssl.cipher.suites=TLS_AES_128_GCM_SHA256" 2>"$out/kafka-start.log" | tail -n1)"
  names+=(kafka) pids+=("$kpid") plain+=("127.0.0.1:$p") ssl+=("127.0.0.1:$((p + 1))")
fi

# One topic per broker, written through the plaintext listener.
for i in "${!names[@]}"; do
  "$client" bench produce --bootstrap "${plain[$i]}" --topic tlsfetch --partitions "$PARTITIONS" \
    --message-size 1024 --max-messages "$MESSAGES" --acks 1 --warmup 0s --duration 300s --quiet \
    >"$out/produce-${names[$i]}.log" 2>&1
done

cpu_ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }
printf '%-8s %-9s %4s %10s %10s %12s\n' broker listener rep 'MB/s' 'cpu ms' 'cpu µs/MB' | tee "$out/results.txt"
for rep in $(seq "$REPS"); do
  order=("${!names[@]}")
  if (( rep % 2 == 0 )); then order=($(printf '%s\n' "${order[@]}" | tac)); fi
  for i in "${order[@]}"; do
    listeners=(plaintext tls)
    (( rep % 2 == 0 )) && listeners=(tls plaintext)
    for l in "${listeners[@]}"; do
      if [[ "$l" == tls ]]; then args=(--bootstrap "${ssl[$i]}" --tls-ca "$out/ca.pem"); else args=(--bootstrap "${plain[$i]}"); fi
      log="$out/consume-${names[$i]}-$l-$rep.log"
      t0="$(cpu_ticks "${pids[$i]}")"
      timeout -k 5 300 "$client" bench consume "${args[@]}" --topic tlsfetch --max-messages "$MESSAGES" \
        --duration 240s >"$log" 2>&1 || echo "exit status $?" >>"$log"
      t1="$(cpu_ticks "${pids[$i]}")"
      mbs="$(sed -n 's/.* \([0-9.]*\) MB\/s$/\1/p' "$log" | tail -n1)"
      bytes="$(sed -n 's/.* messages, \([0-9]*\) bytes in .*/\1/p' "$log" | tail -n1)"
      awk -v b="${names[$i]}" -v l="$l" -v r="$rep" -v m="${mbs:-0}" -v by="${bytes:-0}" -v a="$t0" -v z="$t1" -v h="$CLK_TCK" \
        'BEGIN { ms = (z - a) * 1000 / h; printf "%-8s %-9s %4d %10.1f %10.0f %12.0f\n", b, l, r, m, ms, (by > 0 ? ms * 1000 / (by / 1e6) : 0) }' |
        tee -a "$out/results.txt"
    done
  done
done
