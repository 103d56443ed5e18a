package jobs

import (
	"context"
	"fmt"
	"net/url"

	"github.com/belfry/belfry/registry"
)

// DigestConfig is the static payload of the digest schedule.
type DigestConfig struct {
	To string
}

var digestConfig = DigestConfig{To: "team@example.com"}

// SendDigest mails the weekday digest for the day of the occurrence.
//
//cron:schedule "0 8 * * MON-FRI" name=send-digest tz=Europe/Berlin payload=digestConfig retry=5
func SendDigest(ctx context.Context, occ registry.Occurrence, cfg DigestConfig) error {
	fmt.Println("digest", cfg.To, occ.Key())
	return nil
}

var statusPage = url.URL{Scheme: "https", Host: "status.example.com"}

// probeStatus checks the public status page; its payload type comes from
// another package, which the generated file must import.
//
//cron:schedule "*/10 * * * *" payload=statusPage timeout=90s grace=1m
func probeStatus(ctx context.Context, occ registry.Occurrence, page url.URL) error {
	fmt.Println("probe", page.String(), occ.Key())
	return nil
}
