#!/bin/sh
# Renders the e2e demo media into the worker's blob directory ($1), the same recipes and names
# as the local stack (internal/localstack/media.go), so the worker serves them at /v1/blobs/<name> and the
# tests need nothing from the internet. Runs as an init container of the worker, from the worker
# image, which carries the two public-domain portraits of internal/portraits (see its NOTICE).
set -eu
out=$1
portraits=/usr/share/videogen/portraits
person=$portraits/grace-hopper.jpg  # the person in the templates
face=$portraits/eileen-collins.jpg  # the demo face put into them
for f in "$person" "$face"; do
  [ -f "$f" ] || { echo "missing $f: build the worker image from this repository's Dockerfile.worker" >&2; exit 1; }
done

fit="scale=320:240:force_original_aspect_ratio=decrease,pad=320:240:(ow-iw)/2:(oh-ih)/2,setsar=1"
watermark="drawbox=x=230:y=190:w=70:h=35:color=white:t=fill,drawbox=x=238:y=198:w=54:h=19:color=black:t=fill"
h264="-c:v libx264 -preset veryfast -pix_fmt yuv420p -c:a aac -shortest"

# render NAME ARGS...: writes $out/NAME unless it exists (the emptyDir survives container restarts).
render() {
  name=$1; shift
  [ -f "$out/$name" ] && return 0
  tmp="$out/.tmp-$name"
  # The output format comes from the final name's extension, not the temporary one's.
  ffmpeg -hide_banner -loglevel error -y "$@" -f "$(format "$name")" "$tmp"
  mv "$tmp" "$out/$name"
  echo "made $name"
}
format() {
  case $1 in
    *.mp4) echo mp4 ;;
    *.jpg) echo image2 ;;
    *.png) echo image2 ;;
  esac
}

# Names: the first 32 hex digits of sha256("localstack-v1/<recipe>"), as the local stack uses.
# The name of a recipe whose output changes must change too: an old blob would be kept.
# shellcheck disable=SC2086 # $h264 is a list of ffmpeg options
render ad5fcf2f79a3748603921ef5fbb73162.mp4 -loop 1 -framerate 15 -i "$person" -f lavfi -i sine=frequency=440:duration=3 \
  -vf "$fit,zoompan=z='1+0.0015*on':d=1:s=320x240:fps=15" -t 3 $h264                      # portrait.mp4
render 985fff70fcea0e7ac10ce8987d2972ee.jpg -i "$person" -vf "$fit" -frames:v 1              # portrait-cover.jpg
render a13976ff7481a7c6df53dab8e96245d9.jpg -i "$face" -frames:v 1                          # face-eileen-collins.jpg
# shellcheck disable=SC2086
render 3dd535995dfc99c1edb8444ab4f16736.mp4 -f lavfi -i testsrc2=size=320x240:rate=15:duration=4 \
  -f lavfi -i sine=frequency=330:duration=4 $h264                                             # countdown.mp4
render 1e2881b75b4397eac55b6536fff96883.png -f lavfi -i testsrc2=size=320x240:rate=1:duration=1 -frames:v 1  # countdown-cover.png
# shellcheck disable=SC2086
render 8ef5e7e8348da325f029fcaca3e59e3f.mp4 -f lavfi -i testsrc2=size=320x240:rate=15:duration=3 \
  -f lavfi -i sine=frequency=550:duration=3 -vf "scroll=h=0.01:v=0.007,$watermark" $h264    # watermarked.mp4
render 0e4aa829d1782732384321ca91b4caac.png -i "$person" -vf scale=320:-2 -frames:v 1          # pose.png
