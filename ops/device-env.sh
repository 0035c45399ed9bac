#!/usr/bin/env bash
# device-env.sh - source this on a GPU host that lacks the Debian runtime
# libraries: unpacks the .debs carried in .debs/ into /tmp/ftdeps and points
# LD_LIBRARY_PATH there.  (Fetch them first with:
#   mkdir -p .debs && cd .debs && apt-get download libjansson4 libxxhash0 \
#     libnng1 libconfig9 libmbedcrypto7 libmbedtls14 libmbedx509-1 libmarisa0)
for f in .debs/*.deb; do dpkg -x "$f" /tmp/ftdeps; done
export LD_LIBRARY_PATH=/tmp/ftdeps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export NCCL_NVLS_ENABLE=0
