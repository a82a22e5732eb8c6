package cost

import "math"

// Design describes how a pipeline design consumes resources: a fixed amount
// per scheduled run, an amount per exported file (one Distributed Map child),
// an amount per delivered change, and always-on usage per day.
type Design struct {
	Name             string
	PerWindow        Usage
	PerFile          Usage
	PerChange        Usage
	PerDay           Usage
	ResourcesPerFile float64 // HealthLake splits an export into files of about this many resources
	TypesPerWindow   float64 // distinct resource types changed in a busy window (one file each at least)
}

// Files returns how many export files a window with n changes produces.
func (d Design) Files(changesPerWindow float64) float64 {
	if changesPerWindow <= 0 {
		return 0
	}
	per := d.ResourcesPerFile
	if per <= 0 {
		per = 5000
	}
	types := math.Min(math.Max(d.TypesPerWindow, 1), changesPerWindow)
	return math.Max(types, math.Ceil(changesPerWindow/per))
}

// Daily returns the usage of one day with the given number of changes spread
// evenly over the given number of scheduled runs.
func (d Design) Daily(changesPerDay, windowsPerDay float64) Usage {
	perWindow := 0.0
	if windowsPerDay > 0 {
		perWindow = changesPerDay / windowsPerDay
	}
	u := d.PerDay
	u = u.Add(d.PerWindow.Scale(windowsPerDay))
	u = u.Add(d.PerFile.Scale(d.Files(perWindow) * windowsPerDay))
	u = u.Add(d.PerChange.Scale(changesPerDay))
	u.LambdaArm64 = d.PerWindow.LambdaArm64
	return u
}

// ThisDesign is the usage model of healthlake-cdc, with per-run figures as
// counted by cdc-local (docs/COST.md says how they were measured): one
// STANDARD execution of ten state transitions per run (five of the run,
// three of the delete branch, two of the change branch), a Distributed Map
// child (EXPRESS) and one prepare-change invocation per export file,
// PutEvents batches of ten entries, arm64 Lambdas.
func ThisDesign() Design {
	return Design{
		Name: "healthlake-cdc",
		PerWindow: Usage{
			StateTransitions:  10,
			LambdaRequests:    6,    // run-lock acquire + commit, start-export, two check-export polls, the delete scan
			LambdaGBSeconds:   0.75, // 5 × 0.2 s × 256 MB, and the delete scan: ~1 s × 512 MB (146 history pages, 8 at a time)
			LambdaArm64:       true,
			SQSRequests:       7, // start message, two re-check messages, their deletes, heartbeats are free (SFN)
			DynamoWriteUnits:  6, // lock, ledger claim, ledger job, checkpoint commit, history, replay-safe release
			DynamoReadUnits:   2,
			S3PutListRequests: 6, // manifest, ResultWriter manifest and results; the batch's delivered-index and overlap objects, the overlap listing (one batch)
			S3GetRequests:     4, // ItemReader, ResultWriter read-back at commit, the previous window's overlap object
		},
		PerFile: Usage{
			ExpressRequests:   1,
			ExpressGBSeconds:  0.0625 * 2, // 64 MB billing floor × ~2 s per file
			LambdaRequests:    1,
			LambdaGBSeconds:   0.5 * 2, // 512 MB × ~2 s per 5,000-resource file
			S3PutListRequests: 1,       // HealthLake writes the file into our bucket
			S3GetRequests:     1,       // prepare-change streams it
		},
		PerChange: Usage{
			EventChunks: 1, // entries under 64 KB; larger resources are claim-checked
		},
		PerDay: Usage{
			SQSRequests: 2 * 5 * 3 * 60 * 24, // two queues, five ESM pollers, 20 s long polls
		},
		ResourcesPerFile: 5000,
		TypesPerWindow:   8,
	}
}

// PublishedDesign is the usage model of the published design: a STANDARD
// Map iteration, a Lambda invocation and a PutEvents call per record.
func PublishedDesign() Design {
	d := ThisDesign()
	d.Name = "published design"
	d.PerFile = Usage{S3PutListRequests: 1, S3GetRequests: 1}
	d.PerChange = Usage{
		StateTransitions: 2,      // the iteration's Task state and its end
		LambdaRequests:   1,      // one invocation per record
		LambdaGBSeconds:  0.0128, // 128 MB × 100 ms
		EventChunks:      1,
	}
	d.PerWindow.LambdaArm64 = false
	return d
}
