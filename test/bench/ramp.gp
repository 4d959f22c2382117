# Pool length and consumption over time during the end-to-end load ramp.
#   gnuplot -e "dir='RESULTS_DIR'" test/bench/ramp.gp   -> RESULTS_DIR/ramp.png
# Data written by results.py ramp: ramp-llen.dat "t_s len",
# ramp-cons.dat "t_s ids_per_s empties_per_s target" (a blank line between steps).
if (!exists("dir")) dir = "."
set terminal pngcairo size 1200,700 font ",10"
set output dir."/ramp.png"
set title "idpoold refilling while clients drain one pool (LPOP batch 100): load ramp, then holds at the sustained rate"
set xlabel "time (s)"
set ylabel "IDs/s consumed"
set y2label "pool length (IDs)"
set ytics nomirror
set y2tics
set format y "%.1s%c"
set format y2 "%.1s%c"
set yrange [0:*]
set y2range [0:*]
set grid
set key below horizontal
plot dir."/ramp-cons.dat" using 1:2 with lines lw 1.5 lc rgb "#1f77b4" title "consumed (per 100 ms)", \
     dir."/ramp-cons.dat" using 1:4 with lines dt 2 lc rgb "#2ca02c" title "target rate", \
     dir."/ramp-cons.dat" using 1:($3 > 0 ? $2 : 1/0) with points pt 7 ps 0.8 lc rgb "#d62728" title "interval with empty pops", \
     dir."/ramp-llen.dat" using 1:2 axes x1y2 with lines lc rgb "#ff7f0e" title "pool length (right axis)"
