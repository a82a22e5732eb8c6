package asl

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
)

func (rn *run) mapState(ctx context.Context, s *state, raw any, sc stateCtx) (any, error) {
	ctxObj := rn.ctxObject(sc)
	eff, err := inputPath(s, raw, ctxObj)
	if err != nil {
		return nil, err
	}
	distributed := s.itemProcessor.mode == "DISTRIBUTED"
	if s.jsonata {
		return rn.jMapState(ctx, s, raw, sc)
	}
	var items []any
	if s.itemReader != nil {
		if items, err = rn.readItems(ctx, s, eff, ctxObj); err != nil {
			return nil, err
		}
	} else {
		v := eff
		if s.itemsPath != nil {
			if v, err = s.itemsPath.get(eff, ctxObj); err != nil {
				return nil, err
			}
		}
		arr, ok := v.([]any)
		if !ok {
			return nil, runtimeErr("Map state '%s': the ItemsPath does not select an array", s.name)
		}
		items = arr
	}
	inputs := make([]any, len(items))
	for i, it := range items {
		if s.itemSelector == nil {
			inputs[i] = deepCopy(it)
			continue
		}
		isc := sc
		isc.hasItem, isc.itemIndex, isc.itemValue = true, i, it
		v, err := s.itemSelector.eval(eff, rn.ctxObject(isc))
		if err != nil {
			return nil, err
		}
		if !distributed { // a Distributed Map fails the child instead
			if err := checkSize(v, fmt.Sprintf("input of iteration %d of state '%s' after ItemSelector", i, s.name)); err != nil {
				return nil, err
			}
		}
		inputs[i] = v
	}
	var weights []int // items per child execution; nil: one each
	if s.itemBatcher != nil {
		if inputs, weights, err = rn.batchItems(s, inputs, eff, ctxObj); err != nil {
			return nil, err
		}
	}
	conc, err := rn.intField("MaxConcurrencyPath", s.maxConcurrency, s.maxConcurrencyPath, eff, ctxObj)
	if err != nil {
		return nil, err
	}
	var result any
	if distributed {
		result, err = rn.distributed(ctx, s, inputs, weights, int(conc), eff, ctxObj)
	} else {
		result, err = rn.inline(ctx, s, inputs, int(conc))
	}
	if err != nil {
		return nil, err
	}
	return rn.finish(s, raw, result, ctxObj, sc.pend)
}

// jMapState runs a JSONata (inline) Map state: Items (default the input),
// ItemSelector with $states.context.Map.Item, MaxConcurrency.
func (rn *run) jMapState(ctx context.Context, s *state, raw any, sc stateCtx) (any, error) {
	env := rn.ctxObject(sc)
	states := statesVar(raw, env)
	v := raw
	if t := s.jx["Items"]; t != nil {
		var err error
		if v, err = t.eval(states, env); err != nil {
			return nil, err
		}
	}
	items, ok := v.([]any)
	if !ok {
		return nil, Errorf(ErrorQueryEvaluation, "Map state '%s': Items is %s, not an array", s.name, clipJSON(v))
	}
	inputs := make([]any, len(items))
	for i, it := range items {
		if s.jItemSelector == nil {
			inputs[i] = deepCopy(it)
			continue
		}
		isc := sc
		isc.hasItem, isc.itemIndex, isc.itemValue = true, i, it
		ienv := rn.ctxObject(isc)
		sel, err := s.jItemSelector.eval(statesVar(raw, ienv), ienv)
		if err != nil {
			return nil, err
		}
		if err := checkSize(sel, fmt.Sprintf("input of iteration %d of state '%s' after ItemSelector", i, s.name)); err != nil {
			return nil, err
		}
		inputs[i] = sel
	}
	conc := s.maxConcurrency
	if t := s.jx["MaxConcurrency"]; t != nil {
		var err error
		if conc, err = jInt(t, "MaxConcurrency", states, env); err != nil {
			return nil, err
		}
	}
	result, err := rn.inline(ctx, s, inputs, int(conc))
	if err != nil {
		return nil, err
	}
	return rn.finish(s, raw, result, env, sc.pend)
}

func clipJSON(v any) string {
	s := mustJSON(v)
	if len(s) > 256 {
		s = s[:256] + "..."
	}
	return s
}

// forEach runs fn for indexes 0..n-1 with at most conc at once (0: all),
// stopping new work once stop reports true.
func forEach(ctx context.Context, n, conc int, fn func(i int), stop func() bool) {
	if conc <= 0 || conc > n {
		conc = n
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, max(conc, 1))
	for i := 0; i < n; i++ {
		if ctx.Err() != nil || (stop != nil && stop()) {
			break
		}
		sem <- struct{}{}
		if stop != nil && stop() {
			<-sem
			break
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			fn(i)
		}(i)
	}
	wg.Wait()
}

func (rn *run) inline(ctx context.Context, s *state, inputs []any, conc int) (any, error) {
	rn.event(Event{Type: "MapStateStarted", StateName: s.name, Length: len(inputs)})
	results := make([]any, len(inputs))
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var failed sync.Once
	var firstErr error
	forEach(cctx, len(inputs), conc, func(i int) {
		rn.event(Event{Type: "MapIterationStarted", StateName: s.name, Index: i})
		out, err := rn.runProcessor(withScope(cctx, newScope(scopeFrom(ctx))), s.itemProcessor, inputs[i])
		if err != nil {
			if cctx.Err() != nil {
				// stopped because a sibling failed or the execution ended
				rn.event(Event{Type: "MapIterationAborted", StateName: s.name, Index: i})
				return
			}
			e := asError(err)
			rn.event(Event{Type: "MapIterationFailed", StateName: s.name, Index: i, Error: e.Name, Cause: e.Cause})
			failed.Do(func() { firstErr = err; cancel() })
			return
		}
		results[i] = out
		rn.event(Event{Type: "MapIterationSucceeded", StateName: s.name, Index: i})
	}, func() bool { return cctx.Err() != nil })
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if firstErr != nil {
		e := asError(firstErr)
		rn.event(Event{Type: "MapStateFailed", StateName: s.name, Error: e.Name, Cause: e.Cause})
		return nil, e
	}
	rn.event(Event{Type: "MapStateSucceeded", StateName: s.name})
	return results, nil
}

func (rn *run) parallel(ctx context.Context, s *state, raw any, sc stateCtx) (any, error) {
	ctxObj := rn.ctxObject(sc)
	eff, err := rn.effectiveInput(s, raw, ctxObj)
	if err != nil {
		return nil, err
	}
	rn.event(Event{Type: "ParallelStateStarted", StateName: s.name})
	results := make([]any, len(s.branches))
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var once sync.Once
	var firstErr error
	forEach(cctx, len(s.branches), 0, func(i int) {
		out, err := rn.runProcessor(withScope(cctx, newScope(scopeFrom(ctx))), s.branches[i], deepCopy(eff))
		if err != nil {
			once.Do(func() { firstErr = err; cancel() })
			return
		}
		results[i] = out
	}, nil)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if firstErr != nil {
		e := asError(firstErr)
		rn.event(Event{Type: "ParallelStateFailed", StateName: s.name, Error: e.Name, Cause: e.Cause})
		return nil, e
	}
	rn.event(Event{Type: "ParallelStateSucceeded", StateName: s.name})
	return rn.finish(s, raw, results, ctxObj, sc.pend)
}

func (rn *run) readItems(ctx context.Context, s *state, eff, ctxObj any) ([]any, error) {
	ir := s.itemReader
	p, err := ir.parameters.eval(eff, ctxObj)
	if err != nil {
		return nil, err
	}
	pm, _ := p.(map[string]any)
	bucket, _ := pm["Bucket"].(string)
	key, _ := pm["Key"].(string)
	if bucket == "" || key == "" {
		return nil, Errorf(ErrorItemReaderFailed, "ItemReader of state '%s' needs string Bucket and Key parameters", s.name)
	}
	if rn.r.cfg.Objects == nil {
		return nil, Errorf(ErrorItemReaderFailed, "no object store is configured")
	}
	body, err := rn.r.cfg.Objects.GetObject(ctx, bucket, key)
	if err != nil {
		return nil, Errorf(ErrorItemReaderFailed, "failed to read s3://%s/%s: %v", bucket, key, err)
	}
	v, err := ParseJSON(string(body))
	if err != nil {
		return nil, Errorf(ErrorItemReaderFailed, "s3://%s/%s is not valid JSON: %v", bucket, key, err)
	}
	items, ok := v.([]any)
	if !ok {
		return nil, Errorf(ErrorItemReaderFailed, "s3://%s/%s does not hold a JSON array", bucket, key)
	}
	limit, err := rn.intField("MaxItemsPath", ir.maxItems, ir.maxPath, eff, ctxObj)
	if err != nil {
		return nil, err
	}
	if limit > 0 && int(limit) < len(items) {
		items = items[:limit]
	}
	return items, nil
}

// childResult is what one Distributed Map child ended as.
type childResult struct {
	x    *Execution
	info ExecutionInfo
}

// batchItems groups the selected items the way ItemBatcher does: in order,
// each batch {"BatchInput": <BatchInput evaluated once against the state's
// effective input and context>, "Items": [...]} ("BatchInput" only when the
// field is set) closes before it would hold more than MaxItemsPerBatch items
// or encode to more than MaxInputBytesPerBatch bytes, the whole child input
// counted (the envelope and BatchInput included); without a byte limit the
// 256 KiB payload limit applies. An item too large for the limit on its own
// forms a batch of one (whose child then fails with States.DataLimitExceeded
// if it exceeds 256 KiB). It returns the batches and their item counts.
func (rn *run) batchItems(s *state, items []any, eff, ctxObj any) ([]any, []int, error) {
	b := s.itemBatcher
	maxItems, err := positiveField("MaxItemsPerBatchPath", b.maxItems, b.maxItemsPath, 0, eff, ctxObj)
	if err != nil {
		return nil, nil, err
	}
	maxBytes, err := positiveField("MaxInputBytesPerBatchPath", b.maxBytes, b.maxBytesPath, MaxPayloadBytes, eff, ctxObj)
	if err != nil {
		return nil, nil, err
	}
	if maxBytes == 0 {
		maxBytes = MaxPayloadBytes
	}
	var batchInput any
	envelope := map[string]any{"Items": []any{}}
	if b.batchInput != nil {
		if batchInput, err = b.batchInput.eval(eff, ctxObj); err != nil {
			return nil, nil, err
		}
		envelope["BatchInput"] = batchInput
	}
	env, err := MarshalJSON(envelope)
	if err != nil {
		return nil, nil, runtimeErr("Map state '%s': the ItemBatcher's BatchInput cannot be encoded: %v", s.name, err)
	}
	var batches []any
	var weights []int
	var cur []any
	size := int64(len(env))
	flush := func() {
		if len(cur) == 0 {
			return
		}
		batch := map[string]any{"Items": cur}
		if b.batchInput != nil {
			batch["BatchInput"] = deepCopy(batchInput)
		}
		batches = append(batches, batch)
		weights = append(weights, len(cur))
		cur, size = nil, int64(len(env))
	}
	for i, it := range items {
		enc, err := MarshalJSON(it)
		if err != nil {
			return nil, nil, runtimeErr("Map state '%s': item %d cannot be encoded: %v", s.name, i, err)
		}
		add := int64(len(enc))
		if len(cur) > 0 {
			add++ // the comma
		}
		if len(cur) > 0 && ((maxItems > 0 && int64(len(cur)) >= maxItems) || size+add > maxBytes) {
			flush()
			add = int64(len(enc))
		}
		cur = append(cur, it)
		size += add
	}
	flush()
	return batches, weights, nil
}

// positiveField returns fixed, or the positive integer (at most limit when
// limit > 0) that p selects; a bad selection is States.Runtime.
func positiveField(name string, fixed int64, p *path, limit int64, eff, ctxObj any) (int64, error) {
	if p == nil {
		return fixed, nil
	}
	v, err := p.get(eff, ctxObj)
	if err != nil {
		return 0, err
	}
	n, ok := isInteger(v)
	if !ok || n <= 0 || (limit > 0 && n > limit) {
		if limit > 0 {
			return 0, runtimeErr("%s '%s' does not select a positive integer of at most %d", name, p.src, limit)
		}
		return 0, runtimeErr("%s '%s' does not select a positive integer", name, p.src)
	}
	return n, nil
}

// distributed runs one child execution per input. weights[i] is the number
// of items input i carries (an ItemBatcher batch); nil means one each. The
// tolerated failure threshold counts items, as Step Functions does: a failed
// child fails every item of its batch.
func (rn *run) distributed(ctx context.Context, s *state, inputs []any, weights []int, conc int, eff, ctxObj any) (any, error) {
	cfg := rn.r.cfg
	mapRunID := newUUID()
	label := s.label
	if label == "" {
		label = s.name
	}
	smName := rn.x.info.StateMachineName
	mapRunARN := fmt.Sprintf("arn:aws:states:%s:%s:mapRun:%s/%s:%s", cfg.Region, cfg.AccountID, smName, label, mapRunID)
	rn.event(Event{Type: "MapStateStarted", StateName: s.name, Length: len(inputs)})
	rn.event(Event{Type: "MapRunStarted", StateName: s.name, MapRunARN: mapRunARN})

	tolPct, err := rn.tolerance(s, eff, ctxObj)
	if err != nil {
		return nil, err
	}
	tolCount := int64(-1)
	if s.hasTolCt || s.toleratedCountPath != nil {
		if tolCount, err = rn.intField("ToleratedFailureCountPath", s.toleratedCount, s.toleratedCountPath, eff, ctxObj); err != nil {
			return nil, err
		}
	}
	weight := func(i int) int {
		if weights == nil {
			return 1
		}
		return weights[i]
	}
	totalItems := 0
	for i := range inputs {
		totalItems += weight(i)
	}
	exceeded := func(failed int) bool {
		if failed == 0 {
			return false
		}
		if tolCount >= 0 && int64(failed) > tolCount {
			return true
		}
		if tolPct >= 0 && float64(failed)*100/float64(totalItems) > tolPct {
			return true
		}
		return tolCount < 0 && tolPct < 0
	}

	child := &Machine{root: s.itemProcessor}
	results := make([]*childResult, len(inputs))
	var mu sync.Mutex
	failed := 0
	forEach(ctx, len(inputs), conc, func(i int) {
		name := newUUID()
		var arn string
		if s.itemProcessor.executionType == TypeExpress {
			arn = fmt.Sprintf("arn:aws:states:%s:%s:express:%s/%s:%s:%s", cfg.Region, cfg.AccountID, smName, label, mapRunID, name)
		} else {
			arn = fmt.Sprintf("arn:aws:states:%s:%s:execution:%s/%s:%s", cfg.Region, cfg.AccountID, smName, label, name)
		}
		in, err := MarshalJSON(inputs[i])
		if err == nil && len(in) > MaxPayloadBytes {
			what := "item"
			if weights != nil {
				what = "batch"
			}
			err = Errorf(ErrorDataLimitExceeded, "%s %d is %d bytes", what, i, len(in))
		}
		var cx *Execution
		var input any
		if err == nil {
			cx, input, err = rn.r.newExecution(StartInput{
				ExecutionARN: arn, Name: name, StateMachineARN: rn.x.info.StateMachineARN, StateMachineName: smName,
				RoleARN: rn.x.roleARN, Type: s.itemProcessor.executionType, Input: in, MapRunARN: mapRunARN,
			})
		}
		if err != nil {
			e := asError(err)
			mu.Lock()
			results[i] = &childResult{info: ExecutionInfo{ARN: arn, Name: name, Input: in, Status: StatusFailed, Error: e.Name, Cause: e.Cause, StartDate: rn.now(), StopDate: rn.now()}}
			failed += weight(i)
			mu.Unlock()
			return
		}
		if cfg.OnChildExecution != nil {
			cfg.OnChildExecution(cx)
		}
		cctx, cancel := context.WithCancelCause(ctx)
		cx.cancel = cancel
		rn.r.runExecution(cctx, child.root, 0, cx, input)
		cancel(nil)
		info := cx.Info()
		mu.Lock()
		results[i] = &childResult{x: cx, info: info}
		if info.Status != StatusSucceeded {
			failed += weight(i)
		}
		mu.Unlock()
	}, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return exceeded(failed)
	})
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}

	var output any
	if s.resultWriter != nil {
		out, err := rn.writeResults(ctx, s, mapRunARN, mapRunID, results, eff, ctxObj)
		if err != nil {
			rn.event(Event{Type: "MapRunFailed", StateName: s.name, MapRunARN: mapRunARN, Error: ErrorResultWriterFailed, Cause: err.(*Error).Cause})
			return nil, err
		}
		output = out
	} else {
		arr := make([]any, 0, len(results))
		for _, r := range results {
			if r == nil {
				continue
			}
			if r.info.Status == StatusSucceeded {
				v, _ := ParseJSON(r.info.Output)
				arr = append(arr, v)
			} else {
				arr = append(arr, map[string]any{"Error": r.info.Error, "Cause": r.info.Cause})
			}
		}
		output = arr
	}
	if exceeded(failed) {
		cause := fmt.Sprintf("The specified tolerated failure threshold was exceeded: %d of %d items failed", failed, totalItems)
		rn.event(Event{Type: "MapRunFailed", StateName: s.name, MapRunARN: mapRunARN, Error: ErrorExceedToleratedFailure, Cause: cause})
		rn.event(Event{Type: "MapStateFailed", StateName: s.name, Error: ErrorExceedToleratedFailure, Cause: cause})
		return nil, &Error{Name: ErrorExceedToleratedFailure, Cause: cause}
	}
	rn.event(Event{Type: "MapRunSucceeded", StateName: s.name, MapRunARN: mapRunARN})
	rn.event(Event{Type: "MapStateSucceeded", StateName: s.name})
	return output, nil
}

// tolerance returns the tolerated failure percentage, or -1 when unset.
func (rn *run) tolerance(s *state, eff, ctxObj any) (float64, error) {
	switch {
	case s.toleratedPercentPath != nil:
		v, err := s.toleratedPercentPath.get(eff, ctxObj)
		if err != nil {
			return 0, err
		}
		f, ok := toFloat(v)
		if !ok || f < 0 || f > 100 || math.IsNaN(f) {
			return 0, runtimeErr("ToleratedFailurePercentagePath does not select a number between 0 and 100")
		}
		return f, nil
	case s.hasToleratedPct:
		return s.toleratedPercent, nil
	}
	return -1, nil
}

// writeResults exports the child results the way ResultWriter does:
// {Prefix}/{mapRunId}/SUCCEEDED_0.json, FAILED_0.json, PENDING_0.json and
// manifest.json.
func (rn *run) writeResults(ctx context.Context, s *state, mapRunARN, mapRunID string, results []*childResult, eff, ctxObj any) (any, error) {
	p, err := s.resultWriter.parameters.eval(eff, ctxObj)
	if err != nil {
		return nil, err
	}
	pm, _ := p.(map[string]any)
	bucket, _ := pm["Bucket"].(string)
	prefix, _ := pm["Prefix"].(string)
	if bucket == "" {
		return nil, Errorf(ErrorResultWriterFailed, "ResultWriter of state '%s' needs a string Bucket", s.name)
	}
	if rn.r.cfg.Objects == nil {
		return nil, Errorf(ErrorResultWriterFailed, "no object store is configured")
	}
	base := mapRunID + "/"
	if prefix != "" {
		base = strings.TrimSuffix(prefix, "/") + "/" + base
	}
	groups := map[string][]any{}
	for _, r := range results {
		if r == nil {
			continue
		}
		status := r.info.Status
		group := StatusFailed
		switch status {
		case StatusSucceeded:
			group = StatusSucceeded
		case StatusRunning:
			group = "PENDING"
		}
		entry := map[string]any{
			"ExecutionArn":    r.info.ARN,
			"Input":           r.info.Input,
			"InputDetails":    map[string]any{"Included": true},
			"Name":            r.info.Name,
			"StartDate":       FormatTime(r.info.StartDate),
			"StateMachineArn": r.info.StateMachineARN,
			"Status":          status,
			"StopDate":        FormatTime(r.info.StopDate),
		}
		if status == StatusSucceeded {
			entry["Output"] = r.info.Output
			entry["OutputDetails"] = map[string]any{"Included": true}
		} else {
			entry["Error"] = r.info.Error
			entry["Cause"] = r.info.Cause
		}
		groups[group] = append(groups[group], entry)
	}
	files := map[string][]any{StatusFailed: {}, "PENDING": {}, StatusSucceeded: {}}
	names := make([]string, 0, len(groups))
	for g := range groups {
		names = append(names, g)
	}
	sort.Strings(names)
	for _, g := range names {
		body, err := MarshalJSON(groups[g])
		if err != nil {
			return nil, Errorf(ErrorResultWriterFailed, "encode %s results: %v", g, err)
		}
		key := base + g + "_0.json"
		if err := rn.r.cfg.Objects.PutObject(ctx, bucket, key, []byte(body)); err != nil {
			return nil, Errorf(ErrorResultWriterFailed, "write s3://%s/%s: %v", bucket, key, err)
		}
		files[g] = append(files[g], map[string]any{"Key": key, "Size": int64(len(body))})
	}
	manifest := map[string]any{
		"DestinationBucket": bucket,
		"MapRunArn":         mapRunARN,
		"ResultFiles": map[string]any{
			"FAILED":    files[StatusFailed],
			"PENDING":   files["PENDING"],
			"SUCCEEDED": files[StatusSucceeded],
		},
	}
	body, err := MarshalJSON(manifest)
	if err != nil {
		return nil, Errorf(ErrorResultWriterFailed, "encode manifest: %v", err)
	}
	key := base + "manifest.json"
	if err := rn.r.cfg.Objects.PutObject(ctx, bucket, key, []byte(body)); err != nil {
		return nil, Errorf(ErrorResultWriterFailed, "write s3://%s/%s: %v", bucket, key, err)
	}
	return map[string]any{
		"MapRunArn":           mapRunARN,
		"ResultWriterDetails": map[string]any{"Bucket": bucket, "Key": key},
	}, nil
}
