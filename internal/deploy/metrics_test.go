package deploy

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A manager's metrics endpoint is HTTPS with its own self-signed
// certificate; one whose project turned secure serving off is plain HTTP.
// Both are read, and the bearer token reaches the endpoint.
func TestScrapeReadsHTTPSAndPlainHTTP(t *testing.T) {
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" || r.Header.Get("Authorization") != "Bearer the-token" {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte("database_info 1\n"))
	})
	for name, srv := range map[string]*httptest.Server{"https": httptest.NewTLSServer(handler), "http": httptest.NewServer(handler)} {
		t.Run(name, func(t *testing.T) {
			defer srv.Close()
			_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
			require.NoError(t, err)
			n, err := strconv.Atoi(port)
			require.NoError(t, err)
			status, body, err := scrapeAt(n)(context.Background(), "the-token")
			require.NoError(t, err)
			assert.Equal(t, http.StatusOK, status)
			assert.Equal(t, "database_info 1\n", string(body))
			status, _, err = scrapeAt(n)(context.Background(), "")
			require.NoError(t, err)
			assert.Equal(t, http.StatusUnauthorized, status)
		})
	}
	assert.Nil(t, scrapeAt(0), "no port recorded: no endpoint known")
}
