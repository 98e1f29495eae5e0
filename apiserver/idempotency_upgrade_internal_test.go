package apiserver

import (
	"testing"

	"k8s.io/utils/ptr"
)

// TestIdempotencyOfAnOlderVersionReplays pins what an Idempotency-Key replay across an upgrade
// rests on: the task name a key maps to and the request hash a replay is compared with. The
// values below are those the apiserver of 8734bf8 (2026-11-25) gave its tasks on a local stack;
// a retry with the same key and body sent after the upgrade must find that task (same name)
// and be answered as its replay (same hash), not with a 422 idempotency_key_reused nor a
// second task and a second charge.
func TestIdempotencyOfAnOlderVersionReplays(t *testing.T) {
	for _, tc := range []struct {
		account, key, wantName string
	}{
		{"demo", "first-video", "vt-chnre2q7zuxbbrxc6drg326z"},
		{"acme", "acme-order-42", "vt-cbmr2d3phj2c2ddecbgn6n7i"},
	} {
		if got := taskName(tc.account, tc.key); got != tc.wantName {
			t.Errorf("taskName(%q, %q) = %s, want %s, the name 8734bf8 gave the key's task", tc.account, tc.key, got, tc.wantName)
		}
	}
	for _, tc := range []struct {
		path, want string
		body       any
	}{
		{"/v1/videos/short", "e8f40d540443a26953366ff7bb74eea6026f816e97d8f58bd89ab121ce9c98b1",
			&shortRequest{TemplateID: ptr.To("demo-portrait"), Face: ptr.To("http://127.0.0.1:8390/v1/blobs/a13976ff7481a7c6df53dab8e96245d9.jpg")}},
		{"/v1/videos/template", "20c3b604059e4a4616bf250bf3e265fcc61e925c1f16caf5cad83e58ad6b10b0",
			&templateVideoRequest{TemplateID: ptr.To("demo-countdown"), Duration: ptr.To[wholeNumber](5), WebhookURL: ptr.To("http://127.0.0.1:8399/hook")}},
		{"/v1/videos/template", "c7b31f8d1325169a0e5343ae8eb9931e778272224bba6d1fb29640f48d9c58b9",
			&templateVideoRequest{TemplateID: ptr.To("demo-countdown"), Duration: ptr.To[wholeNumber](10)}},
		{"/v1/videos/eraser", "af4d9359b65c0d3536cb1bf763316993d3b8a85a5543d7aa3882bd5f1324dde0",
			&eraserRequest{Video: ptr.To("http://127.0.0.1:8390/v1/blobs/8ef5e7e8348da325f029fcaca3e59e3f.mp4")}},
	} {
		if got := requestHash(tc.path, tc.body); got != tc.want {
			t.Errorf("requestHash(%s, %+v) = %s, want %s, the hash 8734bf8 recorded: a replay of its key would answer 422", tc.path, tc.body, got, tc.want)
		}
	}
}
