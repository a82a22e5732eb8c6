package stack

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/healthlake-cdc/healthlake-cdc/internal/awsclient"
)

// Exported is what the HealthLake export jobs wrote in all: their number,
// the non-blank NDJSON lines of their files and those lines' bytes (each
// with its newline).
type Exported struct {
	Jobs, Lines, Bytes int64
}

// Exported reads every export job's files back from S3 and counts them.
func (s *Stack) Exported(ctx context.Context) (Exported, error) {
	var e Exported
	client := awsclient.NewS3(s.Config)
	for _, j := range s.HealthLake.Jobs() {
		e.Jobs++
		for _, f := range j.Output {
			u, err := url.Parse(f.URL)
			if err != nil {
				return Exported{}, fmt.Errorf("stack: export file URL of job %s: %w", j.JobID, err)
			}
			out, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(u.Host), Key: aws.String(strings.TrimPrefix(u.Path, "/"))})
			if err != nil {
				return Exported{}, fmt.Errorf("stack: read export file of job %s: %w", j.JobID, err)
			}
			sc := bufio.NewScanner(out.Body)
			sc.Buffer(make([]byte, 1<<20), 64<<20)
			for sc.Scan() {
				if len(bytes.TrimSpace(sc.Bytes())) > 0 {
					e.Lines++
					e.Bytes += int64(len(sc.Bytes())) + 1
				}
			}
			_ = out.Body.Close()
			if err := sc.Err(); err != nil {
				return Exported{}, fmt.Errorf("stack: read export file of job %s: %w", j.JobID, err)
			}
		}
	}
	return e, nil
}
