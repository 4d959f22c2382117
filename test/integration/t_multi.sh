#!/usr/bin/env bash
# Several daemons, one Redis and one MySQL (brief §1, §4 U M A L): three
# idpoold instances refill three applications (two monotonic, one trend)
# while five consumers pop 1,100,000 IDs concurrently. No ID is handed out
# twice per application; each consumer of a monotonic application sees
# strictly increasing IDs; every ID lies in exactly one lease; leases are
# disjoint; more than one daemon did the work (the one that filled the
# pools is paused mid-run for longer than the lock TTL).
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
setup

add_app m1 max_size_per_second=500 increment_max=2                # pool 30000
add_app m2 max_size_per_second=500 delta=5 remainder=1 increment_max=3 start_offset=77
add_app t1 increasing_type=2 max_size_per_second=500 step=1000
leases() { sql "SELECT lo, hi, instance FROM application_lease WHERE application_id = $(app_col "$1" id)"; }

for d in a b c; do
    start_daemon "$d" --instance "inst-$d" --tick-ms 10 --lock-ttl-ms 1000 --reload-ms 1000
done
filled() { pool_ge m1 24000 && pool_ge m2 24000 && pool_ge t1 24000; }
wait_until 10 filled ||
    fail "pools did not fill"

t0=$(now_us)
pids=()
# consumer NAME KEY COUNT BATCH [idpool-check options]: pop log $DIR/NAME.0.bin
consumer() {
    local name=$1 key=$2 count=$3 batch=$4
    shift 4
    pop "$key" "$count" "$DIR/$name" --batch "$batch" --timeout-ms 45000 "$@" \
        2>"$DIR/$name.err" &
    pids+=($!)
}
consumer c1 m1 250000 100 --type monotonic
consumer c2 m1 250000 1000 --type monotonic
consumer c3 m2 250000 500 --type monotonic --delta 5 --remainder 1 --start-offset 77
consumer c4 t1 200000 250
consumer c5 t1 150000 1000
# More than one daemon must do the work, whatever the timing: the one that
# filled the pools is paused for longer than the lock TTL while the
# consumers pop, so another one has to refill (its own push, if it held a
# lock, is fenced off).
filler=$(for d in a b c; do if log_has "$d" 'app=(m1|m2|t1) pushed'; then echo "$d" && break; fi; done)
sleep 0.2
signal_daemon "$filler" STOP
sleep 1.5
signal_daemon "$filler" CONT
info "paused $filler (it filled the pools) for 1.5 s while the consumers popped"
for i in "${!pids[@]}"; do
    st=0
    wait "${pids[$i]}" || st=$?
    [[ $st == 0 ]] || fail "consumer c$((i + 1)) exited with status $st: $(cat "$DIR/c$((i + 1)).err")"
done
info "1,100,000 IDs popped by 5 consumers in $((($(now_us) - t0) / 1000)) ms"
for d in a b c; do
    daemon_alive "$d" || fail "daemon $d died"
done
for d in a b c; do stop_daemon "$d"; done

# The rest of each pool, popped now that no daemon refills it.
for k in m1 m2 t1; do
    leases "$k" >"$DIR/$k.leases"
    pop "$k" "$(llen "$k")" "$DIR/$k.rest" || fail "popping the rest of $k"
done

check_pops "$DIR/m1.check" --type monotonic --leases "$DIR/m1.leases" \
    --current-offset "$(app_col m1 current_offset)" "$DIR/c1.0.bin" "$DIR/c2.0.bin" || fail "m1"
check_pops "$DIR/m1r.check" --leases "$DIR/m1.leases" "$DIR/c1.0.bin" "$DIR/c2.0.bin" \
    "$DIR/m1.rest.0.bin" || fail "m1 with the rest of the pool"
check_pops "$DIR/m2.check" --type monotonic --leases "$DIR/m2.leases" \
    --current-offset "$(app_col m2 current_offset)" --gap 1:3 --delta 5 --remainder 1 \
    --start-offset 77 "$DIR/c3.0.bin" "$DIR/m2.rest.0.bin" || fail "m2"
check_pops "$DIR/t1.check" --leases "$DIR/t1.leases" --current-offset "$(app_col t1 current_offset)" \
    "$DIR/c4.0.bin" "$DIR/c5.0.bin" "$DIR/t1.rest.0.bin" || fail "t1"
pass "1.1M IDs over 3 apps and 5 consumers: unique per app, increasing per consumer, all leased"

# --- more than one daemon did the work ------------------------------------
for d in a b c; do
    n=$(grep -cE 'app=(m1|m2|t1) pushed [0-9]+ IDs' "$DIR/$d.log" || true)
    info "daemon $d: $n refills, $(cut -f3 "$DIR"/*.leases | grep -c "^inst-$d\$" || true) leases"
done
total=0
refillers=0
for d in a b c; do
    total=$((total + $(grep -cE 'app=(m1|m2|t1) pushed [0-9]+ IDs' "$DIR/$d.log" || true)))
    if log_has "$d" 'app=(m1|m2|t1) pushed [0-9]+ IDs'; then refillers=$((refillers + 1)); fi
done
assert_ge "$total" 20 "refills by all daemons"
assert_ge "$refillers" 2 "daemons that refilled"
ninst=$(cut -f3 "$DIR"/*.leases | sort -u | wc -l)
assert_ge "$ninst" 2 "distinct instances in application_lease"
pass "$refillers daemons refilled, leases reserved by $ninst instances"
