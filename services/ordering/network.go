package ordering

import (
	"context"
	"time"

	"github.com/google/uuid"
)

// Network is the mobile network behind a live provider: it tells when an
// eSIM first attached and how much data it used, and sells bundles (a
// top-up's data and days) on an existing profile.
type Network interface {
	// Usage returns the network's latest reading of each eSIM it knows
	// among iccids; it leaves out those it does not know.
	Usage(ctx context.Context, iccids []string) ([]UsageReading, error)
	// AddBundle adds a top-up's data and days to a profile, once per
	// TopUpID whatever the number of calls. An error wrapping
	// ErrProviderFailed is a definitive refusal (the top-up fails and is
	// refunded); any other leaves the outcome unknown, and the same call
	// may be made again.
	AddBundle(ctx context.Context, b Bundle) error
}

// UsageReading is what a network read of one eSIM.
type UsageReading struct {
	ICCID string
	// AttachedAt is the first attach, zero while the eSIM never attached.
	AttachedAt time.Time
	// UsedBytes is the data used in all since the profile was issued.
	UsedBytes int64
	// ReadAt is when the network read it.
	ReadAt time.Time
}

// Bundle is a top-up as a network applies it.
type Bundle struct {
	TopUpID uuid.UUID
	ICCID   string
	// Bytes is 0 for an unlimited plan's days.
	Bytes int64
	Days  int32
}

// DownloadProgress is an SM-DP+'s report on one profile (ES2+
// handleDownloadProgressInfo, SGP.22 5.3.5): only a successful
// installation moves the eSIM; the other steps are recorded by nobody.
type DownloadProgress struct {
	ICCID string
	// Installed is true for a successful BPP installation (notification
	// point 4, Executed-Success).
	Installed bool
	At        time.Time
}
