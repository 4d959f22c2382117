# Latency distribution of single-ID LPOP: idle vs. while another pool is drained and refilled.
#   gnuplot -e "dir='RESULTS_DIR'" test/bench/latency.gp   -> RESULTS_DIR/latency.png
# Data written by results.py ccdf: lat-<condition>.ccdf "latency_us fraction_slower";
# a condition that was not measured has an empty file and is left out.
if (!exists("dir")) dir = "."
set terminal pngcairo size 1000,650 font ",10"
set output dir."/latency.png"
set title "LPOP (1 ID) latency at a fixed rate, open loop: fraction of requests slower than x"
set xlabel "latency (µs, from the scheduled send time)"
set ylabel "fraction of requests slower"
set logscale xy
set format y "10^{%L}"
set grid
set key top right
set ytics add ("p50" 0.5, "p99" 0.01, "p99.9" 0.001)
conds = "idle drain refill flat"
array titles[4] = ["idle (no refill, no drain)", "another list drained, no refill", \
                   "another pool drained and refilled by idpoold", "that pool drained flat out, refilled"]
array styles[4] = ["lw 2 lc rgb '#2ca02c'", "lw 1.5 lc rgb '#7f7f7f'", "lw 2 lc rgb '#d62728'", \
                   "lw 1 dt 2 lc rgb '#9467bd'"]
cmd = ""
do for [i = 1:4] {
    f = dir."/lat-".word(conds, i).".ccdf"
    if (system("test -s '".f."' && echo 1") eq "1") {
        cmd = cmd.(cmd eq "" ? "" : ", ")."'".f."' using 1:2 with steps ".styles[i]." title '".titles[i]."'"
    }
}
if (cmd ne "") { eval "plot ".cmd }
