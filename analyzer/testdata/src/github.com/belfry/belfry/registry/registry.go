// Package registry stubs the parts of github.com/belfry/belfry/registry
// that handlers under test refer to.
package registry

import "time"

type Occurrence struct {
	Schedule string
	Slot     time.Time
	Zone     string
	Manual   bool
	ID       string
}

func (o Occurrence) Key() string { return o.ID }
