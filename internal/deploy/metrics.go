// Scraping a local manager's metrics endpoint.

package deploy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// maxMetricsBody bounds what a scrape reads: a manager's metrics are tens
// of kilobytes.
const maxMetricsBody = 8 << 20

// scrapeAt scrapes the manager serving metrics on 127.0.0.1:port (nil for
// port 0: none served). The endpoint is HTTPS with the manager's own
// self-signed certificate, as `curl -k` in lab 6.4 reads it; a manager
// whose project turned secure serving off (--metrics-secure=false) is read
// over plain HTTP.
func scrapeAt(port int) func(ctx context.Context, token string) (int, []byte, error) {
	if port == 0 {
		return nil
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		// The manager's own self-signed certificate, on this machine's loopback.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
	}}
	return func(ctx context.Context, token string) (int, []byte, error) {
		status, body, err := scrape(ctx, client, fmt.Sprintf("https://127.0.0.1:%d/metrics", port), token)
		if err != nil && strings.Contains(err.Error(), "server gave HTTP response to HTTPS client") {
			status, body, err = scrape(ctx, client, fmt.Sprintf("http://127.0.0.1:%d/metrics", port), token)
		}
		return status, body, err
	}
}

func scrape(ctx context.Context, client *http.Client, url, token string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxMetricsBody+1))
	if err != nil {
		return resp.StatusCode, nil, err
	}
	if len(body) > maxMetricsBody {
		return resp.StatusCode, nil, errors.New("the metrics are larger than 8 MiB")
	}
	return resp.StatusCode, body, nil
}
