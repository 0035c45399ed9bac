#!/bin/sh
# unit_test.sh - ops/systemd/flashtrie.service: every key is one systemd
# knows (from a list, so the check runs without systemd too), each section
# in its place, the hardening settings hold their exact values, and where
# systemd-analyze is installed "verify" reports nothing and the offline
# "security" review rates it at most 2.0; the sysusers file declares the
# unit's user.  A misspelt copy is caught, so the check itself can fail.
# usage: unit_test.sh FLASHTRIE OPS_DIR
set -u
BIN=$1 OPS=$2
UNIT=$OPS/systemd/flashtrie.service
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "unit_test: $*" >&2; exit 1; }

# The keys this unit may use, per section (systemd 252's man pages:
# systemd.unit, systemd.service, systemd.exec, systemd.kill,
# systemd.resource-control).
KNOWN_Unit="Description Documentation After Before Wants Requires BindsTo
PartOf Conflicts StartLimitIntervalSec StartLimitBurst ConditionPathExists
AssertPathExists"
KNOWN_Service="Type NotifyAccess ExecStart ExecStartPre ExecStartPost ExecReload ExecStop
ExecStopPost KillSignal KillMode TimeoutStartSec TimeoutStopSec
TimeoutSec Restart RestartSec RestartPreventExitStatus SuccessExitStatus
DynamicUser User Group SupplementaryGroups UMask ProtectSystem ReadOnlyPaths
ReadWritePaths InaccessiblePaths RuntimeDirectory RuntimeDirectoryMode
LogsDirectory LogsDirectoryMode StateDirectory ConfigurationDirectory
ProtectHome PrivateTmp NoNewPrivileges CapabilityBoundingSet
AmbientCapabilities RestrictSUIDSGID LockPersonality RestrictRealtime
RestrictNamespaces ProtectKernelTunables ProtectKernelModules
ProtectKernelLogs ProtectControlGroups ProtectClock ProtectHostname
ProtectProc ProcSubset RestrictAddressFamilies SystemCallArchitectures
SystemCallFilter SystemCallErrorNumber MemoryDenyWriteExecute PrivateDevices
PrivateMounts RemoveIPC DevicePolicy DeviceAllow LimitNOFILE LimitMEMLOCK
Environment EnvironmentFile"
KNOWN_Install="WantedBy RequiredBy Alias"

# check_keys FILE: every "Key=" line is in its section's list.
check_keys() {
  awk -v u="$KNOWN_Unit" -v s="$KNOWN_Service" -v i="$KNOWN_Install" '
    BEGIN { split(u, a); for (k in a) ok["Unit", a[k]] = 1
            split(s, a); for (k in a) ok["Service", a[k]] = 1
            split(i, a); for (k in a) ok["Install", a[k]] = 1 }
    /^[ \t]*(#|;|$)/ { next }
    /^\[/ { sec = substr($0, 2, length($0) - 2)
            if (sec != "Unit" && sec != "Service" && sec != "Install") {
              printf "%d: unknown section [%s]\n", NR, sec; bad = 1 }
            next }
    { key = $0; sub(/=.*/, "", key)
      if (index($0, "=") == 0) { printf "%d: not Key=value: %s\n", NR, $0; bad = 1 }
      else if (sec == "") { printf "%d: %s outside a section\n", NR, key; bad = 1 }
      else if (!ok[sec, key]) { printf "%d: unknown key %s in [%s]\n", NR, key, sec; bad = 1 } }
    END { exit bad }' "$1"
}

check_keys "$UNIT" > "$TMP/keys" || fail "$UNIT: $(cat "$TMP/keys")"
sed 's/^ProtectSystem=/ProtectSistem=/' "$UNIT" > "$TMP/typo.service"
check_keys "$TMP/typo.service" > "$TMP/keys" && fail "a misspelt key was not caught"
grep -q "unknown key ProtectSistem in \[Service\]" "$TMP/keys" || fail "typo: $(cat "$TMP/keys")"

# want KEY VALUE: the unit sets KEY to exactly VALUE (the last one counts,
# as in systemd; list-valued keys repeat and are checked with want_has).
want() {
  got=$(sed -n "s/^$1=//p" "$UNIT" | tail -n 1)
  [ "$got" = "$2" ] || fail "$1: want '$2', got '$got'"
}
want_has() {
  grep -qx "$1=$2" "$UNIT" || fail "no line '$1=$2'"
}
want Type notify
want NotifyAccess main
want TimeoutStartSec 15min
want ExecStart "/usr/bin/flashtrie serve --config /etc/flashtrie/flashtrie.conf"
want ExecReload '/bin/kill -HUP $MAINPID'
want KillSignal SIGTERM
want Restart on-failure
want RestartPreventExitStatus 2
want DynamicUser no
want User flashtrie
want Group flashtrie
want ProtectSystem strict
want ReadOnlyPaths "/var/lib/flashtrie /etc/flashtrie"
want RuntimeDirectory flashtrie
want LogsDirectory flashtrie
want ProtectHome yes
want PrivateTmp yes
want NoNewPrivileges yes
want CapabilityBoundingSet ""
want AmbientCapabilities ""
want_has SystemCallFilter @system-service
want_has SystemCallFilter "~@privileged"
want PrivateDevices no
want DevicePolicy closed
want LimitNOFILE 65536
want WantedBy multi-user.target
want_has DeviceAllow "char-nvidia-frontend rw"
want_has DeviceAllow "char-nvidia-uvm rw"
grep -q '^ReadWritePaths=' "$UNIT" && fail "ReadWritePaths: the unit writes only its Runtime and Logs directories"
stop=$(sed -n 's/^TimeoutStopSec=//p' "$UNIT")
# The stop timeout is above serve's default drain (10 s) with room to close.
[ "$stop" -ge 20 ] 2> /dev/null || fail "TimeoutStopSec=$stop: want at least 20 s (drain default 10 s)"

# The sysusers file creates the unit's user.
grep -qx 'u flashtrie - "FlashTrie server" /var/lib/flashtrie /usr/sbin/nologin' \
  "$OPS/systemd/flashtrie.sysusers" || fail "flashtrie.sysusers does not declare user flashtrie"

if ! command -v systemd-analyze > /dev/null; then
  echo "unit_test: ok (systemd-analyze not installed: key list only)"
  exit 0
fi
# verify wants ExecStart's program to exist: point it at the built binary.
sed "s#^ExecStart=/usr/bin/flashtrie #ExecStart=$BIN #" "$UNIT" > "$TMP/flashtrie.service"
systemd-analyze verify "$TMP/flashtrie.service" > "$TMP/verify" 2>&1 ||
  fail "systemd-analyze verify exit $?: $(cat "$TMP/verify")"
[ ! -s "$TMP/verify" ] || fail "systemd-analyze verify: $(cat "$TMP/verify")"
mkdir "$TMP/typo"
sed "s#^ExecStart=/usr/bin/flashtrie #ExecStart=$BIN #; s/^ProtectSystem=/ProtectSistem=/" \
  "$UNIT" > "$TMP/typo/flashtrie.service"
systemd-analyze verify "$TMP/typo/flashtrie.service" > "$TMP/verify" 2>&1
grep -q "Unknown key 'ProtectSistem'" "$TMP/verify" || fail "verify missed a typo: $(cat "$TMP/verify")"

systemd-analyze security --offline=yes "$TMP/flashtrie.service" > "$TMP/sec" 2>&1 ||
  fail "systemd-analyze security exit $?: $(tail -3 "$TMP/sec")"
level=$(sed -n 's/.*Overall exposure level for flashtrie.service: \([0-9.]*\) .*/\1/p' "$TMP/sec")
[ -n "$level" ] || fail "no exposure level: $(tail -3 "$TMP/sec")"
awk -v l="$level" 'BEGIN { exit !(l <= 2.0) }' || fail "exposure $level, want <= 2.0"
if command -v systemd-sysusers > /dev/null; then
  systemd-sysusers --dry-run "$(cd "$OPS/systemd" && pwd)/flashtrie.sysusers" > "$TMP/su" 2>&1 ||
    fail "systemd-sysusers --dry-run: $(cat "$TMP/su")"
  grep -q "user 'flashtrie'" "$TMP/su" || grep -q "flashtrie" /etc/passwd ||
    fail "systemd-sysusers would not create flashtrie: $(cat "$TMP/su")"
fi
echo "unit_test: ok (exposure $level)"
