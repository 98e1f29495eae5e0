package controllers

import "testing"

// The per-receiver share of the webhook workers (a quarter of
// --webhook-concurrency, "one receiver (host and port)", docs/api.md) was keyed by the URL's
// port as written, so https://hooks.example.com/ and https://hooks.example.com:443/, one
// receiver, were two keys, each with its own share. Reachable: accounts whose webhook_url
// names a shared receiver (a SaaS endpoint) with the port and without it; when that receiver
// hangs, it holds two shares of the workers (8 of 16), not one, and every other receiver's
// deliveries wait behind it. (And http://h/ and https://h/, ports 80 and 443, were one key.)
func TestAReceiverIsOneKeyWhetherItsPortIsWrittenOrNot(t *testing.T) {
	for _, same := range [][2]string{
		{"https://hooks.example.com/a", "https://hooks.example.com:443/b"},
		{"http://hooks.example.com/a", "http://HOOKS.example.com.:80/b"},
		{"https://[2001:db8::1]/a", "https://[2001:db8::1]:443/b"},
	} {
		if a, b := webhookHost(same[0]), webhookHost(same[1]); a != b {
			t.Errorf("%s is %q and %s is %q: one receiver, two shares of the workers", same[0], a, same[1], b)
		}
	}
	if a, b := webhookHost("http://hooks.example.com/"), webhookHost("https://hooks.example.com/"); a == b {
		t.Errorf("ports 80 and 443 are one key %q", a)
	}
}
