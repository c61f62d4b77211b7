package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// ServerConfig configures the admin HTTP server.
type ServerConfig struct {
	// Addr is host:port to listen on (port 0 picks a free port; see Server.Addr).
	Addr string
	// Pprof serves Go's profiling endpoints under /debug/pprof/.
	Pprof bool
	// Ready reports readiness for /readyz: nil when ready, else the reason it is not.
	Ready func() error
	// Extra are more endpoints by path (the fault control of a `-tags faults` build:
	// internal/faultctl); nil in a release binary.
	Extra map[string]http.Handler
}

// Server is the admin HTTP listener: /metrics, /healthz, /readyz, and /debug/pprof/ when
// enabled.
type Server struct {
	ln   net.Listener
	srv  *http.Server
	done chan struct{}
	once sync.Once
}

// Listen binds cfg.Addr and serves r's metrics on it in the background.
func Listen(cfg ServerConfig, r *Registry) (*Server, error) {
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, err
	}
	s := &Server{ln: ln, done: make(chan struct{})}
	s.srv = &http.Server{Handler: Handler(cfg, r), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			slog.Error("metrics listener stopped", "addr", ln.Addr().String(), "err", err)
		}
	}()
	return s, nil
}

// Handler returns the admin endpoints' handler.
func Handler(cfg ServerConfig, r *Registry) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{
		ErrorLog:          slog.NewLogLogger(slog.Default().Handler(), slog.LevelWarn),
		ErrorHandling:     promhttp.ContinueOnError,
		Registry:          r.reg, // promhttp_metric_handler_errors_total
		EnableOpenMetrics: true,
	}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		var err error
		if cfg.Ready != nil {
			err = cfg.Ready()
		}
		if err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "not ready:", err)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	if cfg.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	for path, h := range cfg.Extra {
		mux.Handle(path, h)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/" {
			http.NotFound(w, req)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "weir admin: /metrics /healthz /readyz")
		if cfg.Pprof {
			fmt.Fprintln(w, "/debug/pprof/")
		}
	})
	return mux
}

// Addr is the bound address.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the server: it stops accepting, waits up to ctx for in-flight scrapes, then
// closes what remains.
func (s *Server) Close(ctx context.Context) error {
	var err error
	s.once.Do(func() {
		if err = s.srv.Shutdown(ctx); err != nil {
			err = s.srv.Close()
		}
		<-s.done
	})
	return err
}
