package store

import "github.com/belfry/belfry/runtime/engine"

// The store's value types and errors are the engine's (package engine):
// the core speaks of them without naming Redis.
type (
	Rec           = engine.Rec
	Commit        = engine.Commit
	Execution     = engine.Execution
	Record        = engine.Record
	Pause         = engine.Pause
	PauseWindow   = engine.PauseWindow
	LostWrites    = engine.LostWrites
	MemberValue   = engine.MemberValue
	SetMember     = engine.SetMember
	ChangeFloor   = engine.ChangeFloor
	Floor         = engine.Floor
	BucketVersion = engine.BucketVersion
	MemberCursor  = engine.MemberCursor
	MemberCommit  = engine.MemberCommit
	MemberLast    = engine.MemberLast
	Problems      = engine.Problems
	ScheduleData  = engine.ScheduleData
)

var (
	ErrNotLeader   = engine.ErrNotLeader
	ErrMembersBusy = engine.ErrMembersBusy
	ErrBadCursor   = engine.ErrBadCursor
)

// Member buckets and the encodings a MemberCommit carries (package engine).
var (
	BucketOf     = engine.BucketOf
	SplitBucket  = engine.SplitBucket
	EncodeCursor = engine.EncodeCursor
	EncodeLast   = engine.EncodeLast
)
