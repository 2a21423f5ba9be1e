package elect

import "github.com/leaderrun/leaderrun/internal/layout"

// The lock directory's entries that elect makes, as internal/layout names
// them (its package doc lists every entry; the package doc's "Files"
// section describes them for users).
const (
	lockSuffix   = layout.LockSuffix
	stateSuffix  = layout.StateSuffix
	queueSuffix  = layout.QueueSuffix
	beaconSuffix = layout.BeaconSuffix
	inboxSuffix  = layout.InboxSuffix
	stealMarker  = layout.StealMarker
	handoffFile  = layout.HandoffFile
	tmpPrefix    = layout.TmpPrefix
)
