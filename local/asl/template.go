package asl

import (
	"fmt"
	"strings"
)

// template is a compiled payload template (Parameters, ItemSelector,
// ResultSelector, ...): keys ending ".$" take a path or intrinsic function.
type template struct {
	lit    any
	fields []templateField
	items  []*template
	isObj  bool
	isArr  bool
	path   *path
	call   *call
}

type templateField struct {
	key string
	val *template
}

func compileTemplate(v any) (*template, error) {
	switch t := v.(type) {
	case map[string]any:
		out := &template{isObj: true}
		for k, e := range t {
			if name, ok := strings.CutSuffix(k, ".$"); ok {
				s, ok := e.(string)
				if !ok {
					return nil, fmt.Errorf("field %q must be a string path or intrinsic function", k)
				}
				dyn, err := compileDynamic(s)
				if err != nil {
					return nil, fmt.Errorf("field %q: %w", k, err)
				}
				out.fields = append(out.fields, templateField{key: name, val: dyn})
				continue
			}
			sub, err := compileTemplate(e)
			if err != nil {
				return nil, err
			}
			out.fields = append(out.fields, templateField{key: k, val: sub})
		}
		return out, nil
	case []any:
		out := &template{isArr: true}
		for _, e := range t {
			sub, err := compileTemplate(e)
			if err != nil {
				return nil, err
			}
			out.items = append(out.items, sub)
		}
		return out, nil
	}
	return &template{lit: v}, nil
}

// compileDynamic compiles the value of a ".$" field.
func compileDynamic(s string) (*template, error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "States.") {
		c, err := parseIntrinsic(s)
		if err != nil {
			return nil, err
		}
		return &template{call: c}, nil
	}
	p, err := compilePath(s)
	if err != nil {
		return nil, err
	}
	return &template{path: p}, nil
}

func (t *template) eval(input, ctxObj any) (any, error) {
	switch {
	case t.path != nil:
		v, err := t.path.get(input, ctxObj)
		if err != nil {
			return nil, err
		}
		return deepCopy(v), nil
	case t.call != nil:
		return t.call.eval(input, ctxObj)
	case t.isObj:
		m := make(map[string]any, len(t.fields))
		for _, f := range t.fields {
			v, err := f.val.eval(input, ctxObj)
			if err != nil {
				return nil, err
			}
			m[f.key] = v
		}
		return m, nil
	case t.isArr:
		a := make([]any, len(t.items))
		for i, it := range t.items {
			v, err := it.eval(input, ctxObj)
			if err != nil {
				return nil, err
			}
			a[i] = v
		}
		return a, nil
	}
	return deepCopy(t.lit), nil
}
