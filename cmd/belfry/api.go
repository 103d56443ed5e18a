package main

import (
	"encoding/json"
	"time"
)

// The admin API's JSON as the CLI reads it (runtime/admin: admin.go,
// members.go, next.go). Fields the CLI does not show are left out; -o json
// prints the service's own bytes, all fields included.

type apiSchedule struct {
	Name       string       `json:"name"`
	Expression string       `json:"expression"`
	Zone       string       `json:"zone"`
	Queue      string       `json:"queue"`
	Timeout    string       `json:"timeout"`
	MaxRetry   int          `json:"max_retry"`
	Grace      string       `json:"grace"`
	Overlap    string       `json:"overlap"`
	Misfire    string       `json:"misfire"`
	Source     string       `json:"source"`
	NextRun    *string      `json:"next_run"`
	Status     string       `json:"status"`
	Paused     *apiPause    `json:"paused"`
	LastRun    *apiRecord   `json:"last_run"`
	Counters   *apiCounters `json:"counters"`
	History    []apiRecord  `json:"history"`
	Missing    []apiMissing `json:"missing"`
	// A family's (admin's apiFamily).
	Per         string         `json:"per"`
	Members     *int64         `json:"members"`
	NextRunFor  *apiNextRunFor `json:"next_run_for"`
	Expressions *int           `json:"expressions"`
}

// apiNextRunFor names the members a family's next run is for.
type apiNextRunFor struct {
	Zone       string `json:"zone"`
	Expression string `json:"expression"`
}

type apiPause struct {
	Reason string    `json:"reason"`
	Actor  string    `json:"actor"`
	At     time.Time `json:"at"`
}

type apiRecord struct {
	ID         string    `json:"task_id"`
	Slot       time.Time `json:"slot"`
	Manual     bool      `json:"manual"`
	Outcome    string    `json:"outcome"`
	EnqueuedAt time.Time `json:"enqueued_at"`
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at"`
	DurationMS int64     `json:"duration_ms"`
	Error      string    `json:"error"`
	Attempt    int       `json:"attempt"`
	MaxRetry   int       `json:"max_retry"`
	Actor      string    `json:"actor"`
	Member     string    `json:"member"`
}

type apiCounters struct {
	Enqueued  int64 `json:"enqueued"`
	Manual    int64 `json:"manual"`
	Missed    int64 `json:"missed"`
	Skipped   int64 `json:"skipped"`
	Paused    int64 `json:"paused"`
	Succeeded int64 `json:"succeeded"`
	Failed    int64 `json:"failed"`
}

type apiMissing struct {
	Part   string `json:"part"`
	Reason string `json:"reason"`
}

type apiPage struct {
	Schedules  []rawSchedule  `json:"schedules"`
	NextCursor *string        `json:"next_cursor"`
	Missing    []apiMissing   `json:"missing"`
	Counts     map[string]int `json:"counts"`
}

type apiMember struct {
	Member     string      `json:"member"`
	Zone       string      `json:"zone"`
	Expr       string      `json:"expr"`
	Expression string      `json:"expression"`
	Paused     bool        `json:"paused"`
	NextRun    *string     `json:"next_run"`
	LastRun    *apiLastRun `json:"last_run"`
	Pause      *apiPause   `json:"pause"`
	History    []apiRecord `json:"history"`
}

type apiLastRun struct {
	Slot    time.Time `json:"slot"`
	Outcome string    `json:"outcome"`
	At      time.Time `json:"at"`
}

type apiMembersPage struct {
	Members    []rawMember `json:"members"`
	NextCursor string      `json:"next_cursor"`
}

type apiNextRuns struct {
	Zone     string   `json:"zone"`
	NextRuns []string `json:"next_runs"`
}

type apiHealth struct {
	Status   string   `json:"status"`
	Redis    string   `json:"redis"`
	Leader   string   `json:"leader"`
	Late     []string `json:"late"`
	Failing  []string `json:"failing"`
	Paused   []string `json:"paused"`
	Unserved []string `json:"unserved"`
	Problems []string `json:"problems"`
}

type apiStatus struct {
	Leader   *string  `json:"leader"`
	Replicas []string `json:"replicas"`
}

// rawSchedule and rawMember are list entries kept as the service sent
// them, for -o json.
type (
	rawSchedule = json.RawMessage
	rawMember   = json.RawMessage
)
