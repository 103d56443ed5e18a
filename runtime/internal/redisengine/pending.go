package redisengine

import (
	"cmp"
	"context"
	"errors"
	"net"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	"github.com/belfry/belfry/runtime/engine"
	"github.com/belfry/belfry/runtime/internal/clock"
	"github.com/belfry/belfry/runtime/internal/pipeline"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// ErrUnconfigured is what a Pending answers to a call made on it rather
// than through the runtime New built from it.
var ErrUnconfigured = errors.New("runtime.RedisEngine must be passed to runtime.New before use")

// Pending is a Redis engine not yet configured: the New it is given to
// builds the runtime's engine from its client with the runtime's settings
// (engine.Configurable). Its Engine methods answer the calls made on the
// Pending itself, each failing with ErrUnconfigured.
type Pending struct {
	engine.Engine
	Client redis.UniversalClient
	// taken is set by the New it serves, so that of two News given it at
	// once one serves and the other refuses.
	taken atomic.Bool
}

var _ engine.Configurable = (*Pending)(nil)

// NewPending returns a Redis engine on client, to be configured by the
// runtime it is given to.
func NewPending(client redis.UniversalClient) *Pending {
	return &Pending{Engine: unconfigured(), Client: client}
}

// Configure builds the engine on p's client for cfg, once, with the
// replica acknowledgements its client gets by default (DefaultAcks): the
// engine as core.New takes it, with no runtime.Options to say otherwise.
func (p *Pending) Configure(cfg engine.Config) (engine.Engine, error) {
	return (&Setup{Pending: p, Acks: DefaultAcks(p.Client, cfg.LeaseTTL)}).Configure(cfg)
}

// AckTimeoutDefault bounds each wait for replica acknowledgements, unless
// a fifth of the lease TTL is shorter.
const AckTimeoutDefault = time.Second

// DefaultAcks is what the writes of an engine on client wait for unless
// told otherwise: one replica on a client whose primary a failover
// replaces (FailsOver), none on a single server's.
func DefaultAcks(client redis.UniversalClient, leaseTTL time.Duration) pipeline.Acks {
	if !FailsOver(client) {
		return pipeline.Acks{}
	}
	return pipeline.Acks{Replicas: 1, Timeout: min(AckTimeoutDefault, cmp.Or(leaseTTL, defaultLeaseTTL)/5)}
}

// FailsOver reports whether client follows a primary that a failover
// replaces: a Sentinel failover client (a *redis.Client whose address
// go-redis sets to "FailoverClient", as redis.NewFailoverClient and
// redis.NewUniversalClient with a MasterName make it) or a cluster client.
func FailsOver(client redis.UniversalClient) bool {
	switch c := client.(type) {
	case *redis.ClusterClient:
		return true
	case *redis.Client:
		return c.Options().Addr == failoverClientAddr
	}
	return false
}

// failoverClientAddr is the Addr go-redis gives the options of every
// Sentinel failover client: it dials the primary the sentinels name.
const failoverClientAddr = "FailoverClient"

// Setup is how package runtime configures a Pending: with the settings of
// the Redis engine's own (replica acks, the URL whose secrets errors must
// not show), which engine.Config does not carry. Built is the engine
// Configure built.
type Setup struct {
	*Pending
	Acks  pipeline.Acks
	URL   string
	Built *Engine
}

// Configure takes the Pending (refusing a nil client, and one that serves
// another runtime) and builds the engine for cfg. The client
// is checked here, where every New that takes the engine passes, and
// before the Pending is taken, so that one refused stays free for a New
// with the fault corrected.
func (s *Setup) Configure(cfg engine.Config) (engine.Engine, error) {
	if err := s.checkClient(); err != nil {
		return nil, err
	}
	if !s.taken.CompareAndSwap(false, true) {
		return nil, errors.New("Options.Engine: this runtime.RedisEngine already serves another runtime; make one per runtime")
	}
	var clk clock.Clock
	if cfg.Clock != nil {
		clk = cfg.Clock
	}
	s.Built = New(Config{Client: s.Client, Namespace: cfg.Namespace, HistoryLimit: cfg.HistoryLimit, Limits: cfg.Limits,
		RecordTTL: cfg.RecordTTL, Acks: s.Acks, Replica: cfg.Replica, LeaseTTL: cfg.LeaseTTL, Log: cfg.Logger, Clock: clk,
		MayLead: cfg.MayLead, Registry: cfg.Registry, Service: cfg.Service, URL: s.URL})
	return s.Built, nil
}

// checkClient refuses a client the engine cannot lead on: none.
func (s *Setup) checkClient() error {
	if s.Client == nil {
		return errors.New("Options.Engine: runtime.RedisEngine was given a nil client")
	}
	return nil
}

// refuseCommands is a redis.Limiter that admits no command: each fails
// with err before it reaches a connection.
type refuseCommands struct{ err error }

func (l refuseCommands) Allow() error     { return l.err }
func (refuseCommands) ReportResult(error) {}

// unconfigured is a Redis engine whose every call that reaches Redis fails
// with ErrUnconfigured, and whose client connects nowhere, nor starts
// anything, so that one never configured costs nothing.
func unconfigured() engine.Engine {
	refuse := func(context.Context, string, string) (net.Conn, error) { return nil, ErrUnconfigured }
	client := redis.NewClient(&redis.Options{Dialer: refuse, Limiter: refuseCommands{ErrUnconfigured},
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}})
	return New(Config{Client: client, HistoryLimit: defaultHistoryLimit, LeaseTTL: defaultLeaseTTL})
}

// The defaults of an unconfigured engine, core's own: it answers errors,
// but its lease and store are built as a configured one's are.
const (
	defaultHistoryLimit = 50
	defaultLeaseTTL     = 15 * time.Second
)

// Redact keeps the credentials of the engine's Redis URL out of a message
// for logs and pages (RedactSecrets).
func (e *Engine) Redact(msg string) string { return RedactSecrets(msg, e.cfg.URL) }

// RedactSecrets keeps the credentials of a Redis URL out of a message for
// logs and pages, whatever the characters of the password (a '/' defeats
// parsing the URL, so the secret is cut out as text: everything between
// "://" and the URL's last '@'), and any other URL's userinfo the message
// quotes.
func RedactSecrets(msg, rawURL string) string {
	if _, rest, ok := strings.Cut(rawURL, "://"); ok {
		if at := strings.LastIndexByte(rest, '@'); at > 0 {
			userinfo := rest[:at]
			msg = strings.ReplaceAll(msg, userinfo, "…")
			if _, password, ok := strings.Cut(userinfo, ":"); ok && password != "" {
				msg = strings.ReplaceAll(msg, password, "…")
			}
		}
	}
	return urlUserinfo.ReplaceAllString(msg, "//…@")
}

var urlUserinfo = regexp.MustCompile(`//[^/@]*@`)
