package fetcher

import "net/url"

// redact shortens a URL for messages: signed URLs carry credentials in their query string, and
// failure messages end up in task status that users and operators read.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "the URL"
	}
	u.RawQuery, u.Fragment, u.User = "", "", nil
	return u.String()
}
