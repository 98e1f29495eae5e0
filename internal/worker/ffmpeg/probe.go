package ffmpeg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os/exec"
	"strconv"
	"strings"
)

// Info is what the worker needs to know about a video.
type Info struct {
	// Width and Height as frames are displayed (rotation applied).
	Width  int `json:"width"`
	Height int `json:"height"`
	// FrameRate as ffmpeg writes it, e.g. "15/1" or "30000/1001"; FPS is its value.
	FrameRate string  `json:"frame_rate"`
	FPS       float64 `json:"fps"`
	// Duration in seconds.
	Duration float64 `json:"duration"`
	HasAudio bool    `json:"has_audio"`
	// Codec of the video stream, e.g. "h264".
	Codec string `json:"codec"`
}

// Frames estimates the number of frames.
func (i Info) Frames() int { return max(int(math.Round(i.Duration*i.FPS)), 1) }

type probeOutput struct {
	Streams []struct {
		CodecType    string `json:"codec_type"`
		CodecName    string `json:"codec_name"`
		Width        int    `json:"width"`
		Height       int    `json:"height"`
		RFrameRate   string `json:"r_frame_rate"`
		AvgFrameRate string `json:"avg_frame_rate"`
		Duration     string `json:"duration"`
		SideDataList []struct {
			Rotation float64 `json:"rotation"`
		} `json:"side_data_list"`
	} `json:"streams"`
	Format struct {
		Duration string `json:"duration"`
	} `json:"format"`
}

// VideoFormats are the demuxers Probe and Decode may read a file with: containers of video
// files. ffmpeg otherwise picks one by the file's content, and some read other files: an HLS
// playlist's or a concat script's segments may be paths of the worker's own disk, and a live
// playlist holds ffmpeg until it is killed. A file Probe refused never reaches another command.
const VideoFormats = "mov,mp4,m4a,3gp,3g2,mj2,matroska,webm,avi,mpegts,flv,mpeg,ogg,asf,gif"

// ErrNoVideo: the file has no video stream, or is no media at all.
var ErrNoVideo = errors.New("not a video")

// Probe reads a video's size, frame rate, duration and whether it has sound.
func (t Tools) Probe(ctx context.Context, path string) (Info, error) {
	cmd := exec.CommandContext(ctx, t.ffprobe(), "-v", "error", "-format_whitelist", VideoFormats, "-of", "json",
		"-show_entries", "stream=codec_type,codec_name,width,height,r_frame_rate,avg_frame_rate,duration:stream_side_data=rotation:format=duration", path)
	var stderr tailBuffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if ctx.Err() != nil {
			return Info{}, ctx.Err()
		}
		return Info{}, fmt.Errorf("%w: %s", ErrNoVideo, strings.TrimSpace(stderr.String()))
	}
	var po probeOutput
	if err := json.Unmarshal(out, &po); err != nil {
		return Info{}, fmt.Errorf("reading ffprobe output: %w", err)
	}
	var info Info
	found := false
	for _, s := range po.Streams {
		switch s.CodecType {
		case "audio":
			info.HasAudio = true
		case "video":
			if found {
				continue
			}
			found = true
			info.Width, info.Height, info.Codec = s.Width, s.Height, s.CodecName
			for _, sd := range s.SideDataList {
				if r := math.Abs(sd.Rotation); r == 90 || r == 270 {
					info.Width, info.Height = s.Height, s.Width
				}
			}
			info.FrameRate = s.AvgFrameRate
			if rate(info.FrameRate) <= 0 {
				info.FrameRate = s.RFrameRate
			}
			info.FPS = rate(info.FrameRate)
			info.Duration, _ = strconv.ParseFloat(s.Duration, 64)
		}
	}
	if !found || info.Width <= 0 || info.Height <= 0 || info.FPS <= 0 {
		return Info{}, fmt.Errorf("%w: no video stream with a size and frame rate", ErrNoVideo)
	}
	if d, err := strconv.ParseFloat(po.Format.Duration, 64); err == nil && (info.Duration <= 0 || math.IsNaN(info.Duration)) {
		info.Duration = d
	}
	if info.Duration <= 0 {
		return Info{}, fmt.Errorf("%w: unknown duration", ErrNoVideo)
	}
	return info, nil
}

// rate parses "num/den" (or a plain number); 0 if it is not one.
func rate(s string) float64 {
	num, den, ok := strings.Cut(s, "/")
	n, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0
	}
	if !ok {
		return n
	}
	d, err := strconv.ParseFloat(den, 64)
	if err != nil || d == 0 {
		return 0
	}
	return n / d
}
