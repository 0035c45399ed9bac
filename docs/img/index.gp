# index.gp - made by ops/bench/plot_index.sh; run it in this folder.
set terminal pngcairo size 900,520 font 'sans,10' noenhanced
set grid
set key outside right top box Left reverse width 2
set logscale x
set xlabel 'library size (keys)'
set format x '%.0s%c'
set xtics (100000, 300000, 1000000)
set xrange [83333.3:1200000]
sub = 'flashtrie build of generated keys (seed 1) | 2 cores, AMD EPYC'
set output 'index_build.png'
set title "Index build time vs library size\n".sub
set ylabel 'build time (s, whole command)'
set y2label 'build rate (keys/s)'
set format y2 '%.1s%c'
set ytics nomirror
set y2tics
set yrange [0:*]
set y2range [0:*]
plot 'index.dat' using 1:2 with linespoints lt 1 pt 7 title 'build time (s)', \
     'index.dat' using 1:3 axes x1y2 with linespoints lt 2 pt 5 dt 2 title 'keys/s (right axis)'
set output 'index_size.png'
set title "Index size vs library size\n".sub
set ylabel 'bytes per key'
set y2label 'index file (MB)'
set format y2 '%g'
plot 'index.dat' using 1:4 with linespoints lt 1 pt 7 title 'trie (B/key)', \
     'index.dat' using 1:5 with linespoints lt 3 pt 9 title 'values (B/key)', \
     'index.dat' using 1:6 axes x1y2 with linespoints lt 2 pt 5 dt 2 title 'file (MB, right axis)'
unset output
