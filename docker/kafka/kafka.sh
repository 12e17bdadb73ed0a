#!/usr/bin/env bash
# Single-node Apache Kafka (KRaft, broker+controller) as a plain Java process on 127.0.0.1,
# from the Maven Central jars of org.apache.kafka:kafka_2.13 (see docker/kafka/README.md).
#
#   kafka.sh fetch             resolve the jars into the cache (skipped when already complete)
#   kafka.sh start [--scram] [--tls] [--acl]
#                              fetch if needed, format once, start, wait until ready;
#                              prints FASTCI_KAFKA_BOOTSTRAP=127.0.0.1:<port> on stdout
#   kafka.sh stop              stop the broker by its recorded pid
#   kafka.sh status            print running/stopped; exit 0 when running, 1 when not
#   kafka.sh wipe              stop, then delete the data dir
#
# Only the bootstrap line of `start` and the status line of `status` go to stdout;
# every other message goes to stderr.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
POM="$SCRIPT_DIR/pom.xml"
LOG4J_CONF="$SCRIPT_DIR/log4j2.properties"

KAFKA_HOME="${FASTCI_KAFKA_HOME:-$HOME/.cache/fastci/kafka}"
LIBS="$KAFKA_HOME/libs"
STAMP="$LIBS/.fetched"

PORT="${FASTCI_KAFKA_PORT:-19092}"
CONTROLLER_PORT="${FASTCI_KAFKA_CONTROLLER_PORT:-$((PORT + 1))}"
DATA="${FASTCI_KAFKA_DATA:-$KAFKA_HOME/run-$PORT}"
START_TIMEOUT="${FASTCI_KAFKA_START_TIMEOUT:-60}"
STOP_TIMEOUT="${FASTCI_KAFKA_STOP_TIMEOUT:-20}"
HEAP="${FASTCI_KAFKA_HEAP:-512m}"
SCRAM_USERS="${FASTCI_KAFKA_SCRAM_USERS:-}"
TLS="${FASTCI_KAFKA_TLS:-0}"
ACL="${FASTCI_KAFKA_ACL:-0}"
JAVA="${JAVA:-java}"

PIDFILE="$DATA/kafka.pid"
LOGFILE="$DATA/broker.log"
PROPS="$DATA/server.properties"
CLIENT_PROPS="$DATA/client.properties"
STATEFILE="$DATA/fastci-kafka.state"   # written by start: port, controller port, mode
MARKER="$DATA/.fastci-kafka"            # wipe deletes only directories carrying this marker
FORMATTED="$DATA/.formatted"
TLS_DIR="$DATA/tls"                     # the local CA and the broker's certificate (--tls)

# Kafka's own default for message.max.bytes (1 MiB + 12 bytes of record-batch overhead), written
# out explicitly so it is visible; deliberately not raised.
MESSAGE_MAX_BYTES=1048588

log() { printf 'kafka.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

usage() {
  cat >&2 <<'EOF'
usage: kafka.sh fetch|start [--scram] [--tls] [--acl]|stop|status|wipe
env:   FASTCI_KAFKA_HOME (cache, default ~/.cache/fastci/kafka)  FASTCI_KAFKA_PORT (19092)
       FASTCI_KAFKA_CONTROLLER_PORT (port+1)  FASTCI_KAFKA_DATA (default $FASTCI_KAFKA_HOME/run-<port>)
       FASTCI_KAFKA_START_TIMEOUT (60)  FASTCI_KAFKA_STOP_TIMEOUT (20)  FASTCI_KAFKA_HEAP (512m)
       FASTCI_KAFKA_SCRAM_USERS ("admin:secret,alice:pw"; non-empty turns SCRAM on)
       FASTCI_KAFKA_TLS (1 turns TLS on: a local CA in <data dir>/tls, clients trust tls/ca.pem)
       FASTCI_KAFKA_ACL (1 turns the authorizer on: needs SCRAM users; the first one is the super user)
EOF
}

is_port() { [[ "$1" =~ ^[0-9]+$ ]] && (( $1 >= 1 && $1 <= 65535 )); }

pom_hash() { sha256sum "$POM" | cut -d' ' -f1; }

libs_complete() {
  [[ -f "$STAMP" ]] && [[ "$(cat "$STAMP")" == "$(pom_hash)" ]]
}

cmd_fetch() {
  mkdir -p "$KAFKA_HOME"
  if libs_complete; then
    log "jars already in $LIBS"
    return 0
  fi
  command -v mvn >/dev/null || die "mvn not found (Maven is needed to fetch the Kafka jars)"
  # One fetch at a time per cache dir; a second caller waits, then finds the stamp.
  exec 8>"$KAFKA_HOME/.fetch.lock"
  flock 8
  if libs_complete; then
    exec 8>&-
    log "jars already in $LIBS"
    return 0
  fi
  local tmp="$KAFKA_HOME/libs.tmp.$$" out
  rm -rf "$tmp"
  log "fetching Kafka jars into $LIBS (Maven Central; ~45 MB, cached in ~/.m2 afterwards)"
  if ! out="$(mvn -B -q -f "$POM" dependency:copy-dependencies \
        -DincludeScope=runtime -DoutputDirectory="$tmp" 2>&1)"; then
    printf '%s\n' "$out" | tail -n 40 >&2
    rm -rf "$tmp"
    die "mvn dependency:copy-dependencies failed"
  fi
  compgen -G "$tmp/kafka_2.13-*.jar" >/dev/null || { rm -rf "$tmp"; die "no kafka_2.13 jar was copied"; }
  pom_hash >"$tmp/.fetched"
  rm -rf "$LIBS"
  mv "$tmp" "$LIBS"
  exec 8>&-
  log "fetched $(find "$LIBS" -name '*.jar' | wc -l) jars into $LIBS"
}

# --- process helpers -------------------------------------------------------------------------

# True when $1 is a live (non-zombie) process whose command line is our broker.
pid_is_broker() {
  local pid="$1" state cmdline
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  [[ -r "/proc/$pid/stat" ]] || return 1
  state="$(sed -E 's/^[0-9]+ \(.*\) ([A-Za-z]).*/\1/' "/proc/$pid/stat" 2>/dev/null)" || return 1
  [[ "$state" != Z && "$state" != X ]] || return 1
  cmdline="$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)" || return 1
  [[ "$cmdline" == *kafka.Kafka* && "$cmdline" == *"$PROPS"* ]]
}

recorded_pid() { [[ -f "$PIDFILE" ]] && tr -dc '0-9' <"$PIDFILE"; }

# Prints the pid and returns 0 when our broker is running; removes a stale pid file otherwise.
running_pid() {
  local pid
  pid="$(recorded_pid || true)"
  if [[ -n "$pid" ]] && pid_is_broker "$pid"; then
    printf '%s\n' "$pid"
    return 0
  fi
  if [[ -f "$PIDFILE" ]]; then
    rm -f "$PIDFILE"
  fi
  return 1
}

# True when something accepts TCP connections on 127.0.0.1:$1.
port_open() { timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1"' _ "$1" 2>/dev/null; }

# True when some socket is listening on port $1 on any address (catches 0.0.0.0 and ::).
port_taken() {
  if port_open "$1"; then return 0; fi
  if command -v ss >/dev/null; then
    ss -Htln "sport = :$1" 2>/dev/null | grep -q . && return 0
  fi
  return 1
}

state_get() { [[ -f "$STATEFILE" ]] && sed -n "s/^$1=//p" "$STATEFILE" | head -n 1; }

# --- SCRAM -----------------------------------------------------------------------------------

SCRAM_NAMES=()
SCRAM_PASSWORDS=()
parse_scram_users() {
  local entry name pw IFS=','
  local bad_re='[]["'"'"'\=,[:space:]]'
  for entry in $SCRAM_USERS; do
    [[ -z "$entry" ]] && continue
    [[ "$entry" == *:* ]] || die "FASTCI_KAFKA_SCRAM_USERS entry '$entry' is not name:password"
    name="${entry%%:*}"
    pw="${entry#*:}"
    [[ "$name" =~ ^[A-Za-z0-9._-]+$ ]] || die "SCRAM user name '$name': use only A-Z a-z 0-9 . _ -"
    [[ -n "$pw" ]] || die "SCRAM user '$name' has an empty password"
    # Kept out: they would need escaping in the JAAS string, the properties file or --add-scram.
    [[ "$pw" =~ $bad_re ]] && die "SCRAM password of '$name' contains one of: \" \\ ' = , [ ] or whitespace"
    SCRAM_NAMES+=("$name")
    SCRAM_PASSWORDS+=("$pw")
  done
  (( ${#SCRAM_NAMES[@]} > 0 )) || die "no SCRAM users given (FASTCI_KAFKA_SCRAM_USERS=\"admin:secret,alice:pw\")"
}

# --- TLS -------------------------------------------------------------------------------------

# A CA of this data dir signs the broker's certificate for 127.0.0.1 (keytool, from the JDK), so a
# client verifies the broker as it would on a real cluster: it trusts tls/ca.pem and checks the
# address. Made once per data dir; the store password is random and stays in tls/store.pass.
make_tls_material() {
  [[ -f "$TLS_DIR/.made" ]] && return 0
  command -v keytool >/dev/null || die "keytool not found (it comes with the JDK; TLS needs it)"
  local pass tmp="$TLS_DIR.tmp.$$" out
  rm -rf "$tmp"
  mkdir -p "$tmp"
  pass="$(head -c 18 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')"
  printf '%s\n' "$pass" >"$tmp/store.pass"
  local -a common=(-storetype PKCS12 -storepass "$pass" -keyalg RSA -keysize 2048 -validity 3650)
  if ! out="$( {
    keytool -genkeypair -alias ca -dname "CN=fastci local CA" -ext bc:c -keystore "$tmp/ca.p12" "${common[@]}" &&
    keytool -exportcert -rfc -alias ca -keystore "$tmp/ca.p12" -storepass "$pass" -file "$tmp/ca.pem" &&
    keytool -genkeypair -alias broker -dname "CN=127.0.0.1" -keystore "$tmp/broker.p12" "${common[@]}" &&
    keytool -certreq -alias broker -keystore "$tmp/broker.p12" -storepass "$pass" -file "$tmp/broker.csr" &&
    keytool -gencert -alias ca -keystore "$tmp/ca.p12" -storepass "$pass" -rfc -validity 3650 \
      -ext SAN=ip:127.0.0.1,dns:localhost -ext KU=digitalSignature,keyEncipherment -ext EKU=serverAuth \
      -infile "$tmp/broker.csr" -outfile "$tmp/broker.pem" &&
    keytool -importcert -noprompt -alias ca -file "$tmp/ca.pem" -keystore "$tmp/broker.p12" -storepass "$pass" &&
    keytool -importcert -alias broker -file "$tmp/broker.pem" -keystore "$tmp/broker.p12" -storepass "$pass" &&
    keytool -importcert -noprompt -alias ca -file "$tmp/ca.pem" -keystore "$tmp/truststore.p12" \
      -storetype PKCS12 -storepass "$pass"
  } 2>&1 )"; then
    printf '%s\n' "$out" >&2
    rm -rf "$tmp"
    die "keytool could not make the TLS material"
  fi
  rm -f "$tmp/broker.csr" "$tmp/ca.p12"   # the CA's key is not needed again: nothing else is signed
  : >"$tmp/.made"
  rm -rf "$TLS_DIR"
  mv "$tmp" "$TLS_DIR"
  log "made a local CA and a certificate for 127.0.0.1 in $TLS_DIR (clients trust $TLS_DIR/ca.pem)"
}

# Broker or client properties for the stores, when the mode has TLS.
tls_properties() {
  local role="$1" pass
  pass="$(cat "$TLS_DIR/store.pass")"
  if [[ "$role" == broker ]]; then
    echo "ssl.keystore.type=PKCS12"
    echo "ssl.keystore.location=$TLS_DIR/broker.p12"
    echo "ssl.keystore.password=$pass"
  fi
  echo "ssl.truststore.type=PKCS12"
  echo "ssl.truststore.location=$TLS_DIR/truststore.p12"
  echo "ssl.truststore.password=$pass"
}

# The client listener's security protocol in a mode: plaintext, scram, tls or scram-tls.
listener_protocol() {
  case "$1" in
    plaintext) echo PLAINTEXT ;;
    scram|scram-acl) echo SASL_PLAINTEXT ;;
    tls) echo SSL ;;
    scram-tls|scram-tls-acl) echo SASL_SSL ;;
  esac
}

# --- config ----------------------------------------------------------------------------------

write_server_properties() {
  local mode="$1" tmp="$PROPS.tmp"
  {
    echo "# Written by docker/kafka/kafka.sh on every start; edits are overwritten."
    echo "process.roles=broker,controller"
    echo "node.id=1"
    echo "controller.quorum.voters=1@127.0.0.1:$CONTROLLER_PORT"
    echo "controller.listener.names=CONTROLLER"
    local protocol listener
    protocol="$(listener_protocol "$mode")"
    listener="$(tr '[:upper:]' '[:lower:]' <<<"$protocol")"
    echo "listeners=$protocol://127.0.0.1:$PORT,CONTROLLER://127.0.0.1:$CONTROLLER_PORT"
    echo "advertised.listeners=$protocol://127.0.0.1:$PORT"
    echo "inter.broker.listener.name=$protocol"
    echo "listener.security.protocol.map=CONTROLLER:PLAINTEXT,$protocol:$protocol"
    if [[ "$mode" == scram* ]]; then
      echo "sasl.enabled.mechanisms=SCRAM-SHA-256"
      echo "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-256"
      echo "listener.name.$listener.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"${SCRAM_NAMES[0]}\" password=\"${SCRAM_PASSWORDS[0]}\";"
    fi
    [[ "$mode" == *tls* ]] && tls_properties broker
    if [[ "$mode" == *acl ]]; then
      # Nothing is allowed without an ACL (fastci kafka acls --apply writes them). Super users: the
      # first SCRAM user (the broker's own inter-broker principal, and the admin who applies ACLs),
      # and ANONYMOUS, which is what the PLAINTEXT controller listener on 127.0.0.1 authenticates
      # the broker's own registration and heartbeats as. See docker/kafka/README.md.
      echo "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer"
      echo "allow.everyone.if.no.acl.found=false"
      echo "super.users=User:${SCRAM_NAMES[0]};User:ANONYMOUS"
    fi
    echo "log.dirs=$DATA/logs"
    echo "num.partitions=1"
    echo "# fastci creates its topics (fastci kafka topics --apply, the worker, the producers' targets):"
    echo "# a record for a topic nobody made is refused, not parked in a topic of the default size."
    echo "auto.create.topics.enable=false"
    echo "offsets.topic.replication.factor=1"
    echo "offsets.topic.num.partitions=1"
    echo "transaction.state.log.replication.factor=1"
    echo "transaction.state.log.min.isr=1"
    echo "share.coordinator.state.topic.replication.factor=1"
    echo "share.coordinator.state.topic.min.isr=1"
    echo "group.initial.rebalance.delay.ms=0"
    echo "# Kafka's default, stated explicitly; do not raise it."
    echo "message.max.bytes=$MESSAGE_MAX_BYTES"
  } >"$tmp"
  mv "$tmp" "$PROPS"

  # Client config for the readiness check (and handy for kafka CLI tools: --command-config).
  {
    echo "security.protocol=$(listener_protocol "$mode")"
    if [[ "$mode" == scram* ]]; then
      echo "sasl.mechanism=SCRAM-SHA-256"
      echo "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"${SCRAM_NAMES[0]}\" password=\"${SCRAM_PASSWORDS[0]}\";"
    fi
    [[ "$mode" == *tls* ]] && tls_properties client
    true
  } >"$CLIENT_PROPS"
}

# Runs a Kafka main class from the jars with the quiet log4j2 config.
# C1 only: these are short-lived JVMs, and it saves ~0.4 s per run.
TOOL_JVM_OPTS=(-XX:TieredStopAtLevel=1 -Dlog4j2.configurationFile="$LOG4J_CONF")
kjava() { "$JAVA" "${TOOL_JVM_OPTS[@]}" -cp "$LIBS/*" "$@"; }

format_storage() {
  local mode="$1" uuid out i
  local -a scram_args=()
  uuid="$(kjava kafka.tools.StorageTool random-uuid 2>/dev/null | tail -n 1)"
  [[ "$uuid" =~ ^[A-Za-z0-9_-]{22}$ ]] || die "StorageTool random-uuid printed '$uuid'"
  if [[ "$mode" == scram* ]]; then
    for i in "${!SCRAM_NAMES[@]}"; do
      scram_args+=(--add-scram "SCRAM-SHA-256=[name=${SCRAM_NAMES[$i]},password=${SCRAM_PASSWORDS[$i]}]")
    done
  fi
  if ! out="$(kjava kafka.tools.StorageTool format -t "$uuid" -c "$PROPS" "${scram_args[@]}" 2>&1)"; then
    printf '%s\n' "$out" >&2
    die "StorageTool format failed for $DATA/logs"
  fi
  echo "$uuid" >"$FORMATTED"
  log "formatted $DATA/logs (cluster id $uuid, mode $mode)"
}

# One admin-client round trip (ApiVersions + Metadata to find node 1, then DescribeConfigs on it):
# exit 0 when the broker answers. The jars carry no TopicCommand (that is in kafka-tools, not a
# dependency of kafka_2.13); kafka.admin.ConfigCommand (kafka-configs.sh) is in kafka_2.13.
metadata_ok() {
  local limit="${1:-30}"
  (( limit > 0 )) || limit=1
  timeout "$limit" "$JAVA" "${TOOL_JVM_OPTS[@]}" -cp "$LIBS/*" \
    kafka.admin.ConfigCommand --bootstrap-server "127.0.0.1:$PORT" \
    --command-config "$CLIENT_PROPS" --describe --entity-type brokers --entity-name 1 \
    >"$DATA/readiness.out" 2>&1
}

wait_ready() {
  local pid="$1" deadline=$((SECONDS + START_TIMEOUT))
  while ! port_open "$PORT"; do
    pid_is_broker "$pid" || return 2
    (( SECONDS < deadline )) || return 1
    sleep 0.2
  done
  PORT_OPEN_MS="$(now_ms)"
  while ! metadata_ok "$((deadline - SECONDS))"; do
    pid_is_broker "$pid" || return 2
    (( SECONDS < deadline )) || return 1
    sleep 0.5
  done
}

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
secs_since() { local d=$(( $(now_ms) - $1 )); printf '%d.%03d' $((d / 1000)) $((d % 1000)); }

print_bootstrap() { printf 'FASTCI_KAFKA_BOOTSTRAP=127.0.0.1:%s\n' "$1"; }

cmd_start() {
  local want_scram=0 mode pid t0 rc
  while (( $# )); do
    case "$1" in
      --scram) want_scram=1 ;;
      --tls) TLS=1 ;;
      --acl) ACL=1 ;;
      *) usage; die "unknown option for start: $1" ;;
    esac
    shift
  done
  is_port "$PORT" || die "FASTCI_KAFKA_PORT='$PORT' is not a port"
  is_port "$CONTROLLER_PORT" || die "FASTCI_KAFKA_CONTROLLER_PORT='$CONTROLLER_PORT' is not a port"
  [[ "$PORT" != "$CONTROLLER_PORT" ]] || die "broker and controller port are both $PORT"
  [[ "$START_TIMEOUT" =~ ^[0-9]+$ ]] || die "FASTCI_KAFKA_START_TIMEOUT='$START_TIMEOUT' is not a number of seconds"
  if (( want_scram )) && [[ -z "$SCRAM_USERS" ]]; then
    die "--scram needs users: FASTCI_KAFKA_SCRAM_USERS=\"admin:secret,alice:pw\" (the first one is the broker's own)"
  fi
  [[ "$TLS" == 0 || "$TLS" == 1 ]] || die "FASTCI_KAFKA_TLS='$TLS' is not 0 or 1"
  [[ "$ACL" == 0 || "$ACL" == 1 ]] || die "FASTCI_KAFKA_ACL='$ACL' is not 0 or 1"
  if [[ "$ACL" == 1 && -z "$SCRAM_USERS" ]]; then
    die "--acl needs SCRAM users (FASTCI_KAFKA_SCRAM_USERS): ACLs name authenticated principals, and the first user is the super user"
  fi
  if [[ -n "$SCRAM_USERS" ]]; then
    parse_scram_users
    mode=scram
  else
    mode=plaintext
  fi
  if [[ "$TLS" == 1 ]]; then
    [[ "$mode" == scram ]] && mode=scram-tls || mode=tls
  fi
  [[ "$ACL" == 1 ]] && mode="$mode-acl"
  command -v "$JAVA" >/dev/null || die "java not found"

  cmd_fetch

  umask 077
  local fresh=0
  [[ -d "$DATA" ]] || fresh=1
  mkdir -p "$DATA"
  : >"$MARKER"
  # Serialise concurrent starts on the same data dir.
  exec 9>"$DATA/.start.lock"
  flock 9

  if pid="$(running_pid)"; then
    local rport rmode
    rport="$(state_get port || true)"
    rmode="$(state_get mode || true)"
    [[ "$rport" == "$PORT" ]] || die "a broker (pid $pid) already runs from $DATA on port ${rport:-?}, not $PORT"
    [[ "$rmode" == "$mode" ]] || die "a broker (pid $pid) already runs from $DATA in $rmode mode, not $mode; stop it first"
    log "already running (pid $pid) on 127.0.0.1:$PORT; not starting another"
    rc=0; wait_ready "$pid" || rc=$?
    (( rc == 0 )) || die "the running broker (pid $pid) does not answer a metadata request; see $LOGFILE"
    print_bootstrap "$PORT"
    return 0
  fi

  if [[ -f "$FORMATTED" ]]; then
    local fmode
    fmode="$(state_get mode || true)"
    if [[ -n "$fmode" && "$fmode" != "$mode" ]]; then
      die "$DATA was formatted in $fmode mode; start it in that mode or run 'kafka.sh wipe' first"
    fi
    if [[ "$mode" == scram* && "$(state_get users || true)" != "$(printf '%s\n' "$SCRAM_USERS" | sha256sum | cut -d' ' -f1)" ]]; then
      die "$DATA was formatted with other SCRAM users; run 'kafka.sh wipe' first (users are added at format time)"
    fi
  fi

  local taken=""
  if port_taken "$PORT"; then
    taken="port $PORT (FASTCI_KAFKA_PORT) is already in use; pick another one or stop what holds it"
  elif port_taken "$CONTROLLER_PORT"; then
    taken="controller port $CONTROLLER_PORT (FASTCI_KAFKA_CONTROLLER_PORT) is already in use; pick another one"
  fi
  if [[ -n "$taken" ]]; then
    (( fresh )) && rm -rf -- "$DATA"   # do not leave an empty data dir behind
    die "$taken"
  fi

  [[ "$mode" == *tls* ]] && make_tls_material
  write_server_properties "$mode"
  [[ -f "$FORMATTED" ]] || format_storage "$mode"
  {
    echo "port=$PORT"
    echo "controller_port=$CONTROLLER_PORT"
    echo "mode=$mode"
    [[ "$mode" == scram* ]] && echo "users=$(printf '%s\n' "$SCRAM_USERS" | sha256sum | cut -d' ' -f1)"
    true
  } >"$STATEFILE"

  t0="$(now_ms)"
  log "starting broker on 127.0.0.1:$PORT (controller $CONTROLLER_PORT, $mode), log $LOGFILE"
  rm -f "$PIDFILE" "$DATA/readiness.out"
  # New session, so the broker outlives this shell and a Ctrl-C here; the inner bash writes its
  # own pid and then execs java, so the recorded pid is the JVM's.
  setsid bash -c 'echo $$ >"$1"; shift; exec "$@"' _ "$PIDFILE" \
    "$JAVA" -Xmx"$HEAP" -Dlog4j2.configurationFile="$LOG4J_CONF" \
    -cp "$LIBS/*" kafka.Kafka "$PROPS" </dev/null >"$LOGFILE" 2>&1 9>&- &
  local i
  for i in $(seq 1 50); do
    [[ -s "$PIDFILE" ]] && break
    sleep 0.1
  done
  pid="$(recorded_pid || true)"
  [[ -n "$pid" ]] || die "the broker did not record its pid in $PIDFILE"

  rc=0; wait_ready "$pid" || rc=$?
  if (( rc != 0 )); then
    if (( rc == 2 )); then
      log "the broker exited during startup; last lines of $LOGFILE:"
    else
      log "the broker was not ready within ${START_TIMEOUT}s; last lines of $LOGFILE:"
    fi
    tail -n 40 "$LOGFILE" >&2 || true
    if [[ -s "$DATA/readiness.out" ]]; then
      log "last readiness check output:"
      tail -n 10 "$DATA/readiness.out" >&2 || true
    fi
    stop_broker
    exit 1
  fi
  log "ready in $(secs_since "$t0")s, port open after $(( PORT_OPEN_MS - t0 )) ms (pid $pid)"
  print_bootstrap "$PORT"
}

# Stops the broker recorded in $PIDFILE; never by name.
stop_broker() {
  local pid deadline
  if ! pid="$(running_pid)"; then
    rm -f "$PIDFILE"
    return 0
  fi
  log "stopping broker (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  deadline=$((SECONDS + STOP_TIMEOUT))
  while pid_is_broker "$pid" && (( SECONDS < deadline )); do sleep 0.2; done
  if pid_is_broker "$pid"; then
    log "still running after ${STOP_TIMEOUT}s; sending SIGKILL to $pid"
    kill -KILL "$pid" 2>/dev/null || true
    deadline=$((SECONDS + 10))
    while pid_is_broker "$pid" && (( SECONDS < deadline )); do sleep 0.2; done
    if pid_is_broker "$pid"; then die "pid $pid survived SIGKILL"; fi
  fi
  rm -f "$PIDFILE"
  log "stopped"
}

cmd_stop() { stop_broker; }

cmd_status() {
  local pid
  if pid="$(running_pid)"; then
    echo "running pid=$pid bootstrap=127.0.0.1:$(state_get port || echo "$PORT") data=$DATA"
    return 0
  fi
  echo "stopped data=$DATA"
  return 1
}

cmd_wipe() {
  stop_broker
  if [[ ! -e "$DATA" ]]; then
    log "nothing to wipe at $DATA"
    return 0
  fi
  [[ -f "$MARKER" ]] || die "$DATA has no $(basename "$MARKER") marker; not deleting a directory kafka.sh did not create"
  rm -rf -- "$DATA"
  log "deleted $DATA"
}

main() {
  local cmd="${1:-}"
  (( $# )) && shift
  case "$cmd" in
    fetch)  cmd_fetch "$@" ;;
    start)  cmd_start "$@" ;;
    stop)   cmd_stop "$@" ;;
    status) cmd_status "$@" ;;
    wipe)   cmd_wipe "$@" ;;
    -h|--help|help) usage ;;
    *) usage; exit 2 ;;
  esac
}

main "$@"
