package fakeeventbridge

import (
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Connections and API destinations, the subset rule targets need
// (EventBridge user guide, "API destinations"): CreateConnection with
// API_KEY or BASIC authorization (OAUTH_CLIENT_CREDENTIALS is refused),
// DescribeConnection, DeleteConnection; CreateApiDestination,
// DescribeApiDestination, DeleteApiDestination. The invocation rate limit is
// stored, not enforced.

type connection struct {
	name, authType           string
	headers                  map[string]string
	basicUser, basicPassword string
	created                  time.Time
}

type apiDestination struct {
	name, connectionARN, endpoint, method string
	rateLimit                             int
	created                               time.Time
}

// ConnectionARN and APIDestinationARN name a connection and an API
// destination (the emulator leaves out AWS's trailing UUID).
func (e *Emulator) ConnectionARN(name string) string { return e.arn("connection/" + name) }

// APIDestinationARN returns the ARN of the named API destination.
func (e *Emulator) APIDestinationARN(name string) string { return e.arn("api-destination/" + name) }

func connectionName(arn string) string {
	s := arn[strings.Index(arn, ":connection/")+len(":connection/"):]
	return strings.SplitN(s, "/", 2)[0]
}

func apiDestinationName(arn string) string {
	i := strings.Index(arn, ":api-destination/")
	if i < 0 {
		return ""
	}
	return strings.SplitN(arn[i+len(":api-destination/"):], "/", 2)[0]
}

func resourceNotFound(what string) *apiError {
	return &apiError{status: http.StatusBadRequest, code: "ResourceNotFoundException", message: what + " does not exist."}
}

func (e *Emulator) createConnection(body []byte) (any, *apiError) {
	var in struct {
		Name              string `json:"Name"`
		AuthorizationType string `json:"AuthorizationType"`
		AuthParameters    struct {
			APIKey *struct {
				Name  string `json:"ApiKeyName"`
				Value string `json:"ApiKeyValue"`
			} `json:"ApiKeyAuthParameters"`
			Basic *struct {
				Username string `json:"Username"`
				Password string `json:"Password"`
			} `json:"BasicAuthParameters"`
		} `json:"AuthParameters"`
	}
	if a := decodeBody(body, &in); a != nil {
		return nil, a
	}
	if !nameRE.MatchString(in.Name) {
		return nil, validation("1 validation error detected: Value '" + in.Name + "' at 'name' failed to satisfy constraint: Member must satisfy regular expression pattern: [\\.\\-_A-Za-z0-9]+")
	}
	c := &connection{name: in.Name, authType: in.AuthorizationType, headers: map[string]string{}}
	switch in.AuthorizationType {
	case "API_KEY":
		k := in.AuthParameters.APIKey
		if k == nil || k.Name == "" || k.Value == "" {
			return nil, validation("ApiKeyAuthParameters with ApiKeyName and ApiKeyValue are required for API_KEY.")
		}
		c.headers[k.Name] = k.Value
	case "BASIC":
		b := in.AuthParameters.Basic
		if b == nil || b.Username == "" || b.Password == "" {
			return nil, validation("BasicAuthParameters with Username and Password are required for BASIC.")
		}
		c.basicUser, c.basicPassword = b.Username, b.Password
	case "OAUTH_CLIENT_CREDENTIALS":
		return nil, validation("OAUTH_CLIENT_CREDENTIALS is not supported by the local EventBridge emulator; use API_KEY or BASIC.")
	default:
		return nil, validation("1 validation error detected: Value '" + in.AuthorizationType + "' at 'authorizationType' failed to satisfy constraint: Member must satisfy enum value set: [BASIC, OAUTH_CLIENT_CREDENTIALS, API_KEY]")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.connections[in.Name]; ok {
		return nil, &apiError{status: http.StatusBadRequest, code: "ResourceAlreadyExistsException", message: "Connection " + in.Name + " already exists."}
	}
	c.created = e.opts.Now().UTC()
	e.connections[in.Name] = c
	ts := epoch(c.created)
	return map[string]any{"ConnectionArn": e.ConnectionARN(in.Name), "ConnectionState": "AUTHORIZED", "CreationTime": ts, "LastModifiedTime": ts}, nil
}

func (e *Emulator) describeConnection(body []byte) (any, *apiError) {
	var in struct {
		Name string `json:"Name"`
	}
	if a := decodeBody(body, &in); a != nil {
		return nil, a
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	c, ok := e.connections[in.Name]
	if !ok {
		return nil, resourceNotFound("Connection " + in.Name)
	}
	return map[string]any{"Name": c.name, "ConnectionArn": e.ConnectionARN(c.name), "ConnectionState": "AUTHORIZED",
		"AuthorizationType": c.authType, "CreationTime": epoch(c.created)}, nil
}

func (e *Emulator) deleteConnection(body []byte) (any, *apiError) {
	var in struct {
		Name string `json:"Name"`
	}
	if a := decodeBody(body, &in); a != nil {
		return nil, a
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.connections[in.Name]; !ok {
		return nil, resourceNotFound("Connection " + in.Name)
	}
	delete(e.connections, in.Name)
	return map[string]any{"ConnectionArn": e.ConnectionARN(in.Name), "ConnectionState": "DELETING"}, nil
}

var httpMethods = map[string]bool{"POST": true, "GET": true, "HEAD": true, "OPTIONS": true, "PUT": true, "PATCH": true, "DELETE": true}

func (e *Emulator) createAPIDestination(body []byte) (any, *apiError) {
	var in struct {
		Name                         string `json:"Name"`
		ConnectionArn                string `json:"ConnectionArn"`
		InvocationEndpoint           string `json:"InvocationEndpoint"`
		HTTPMethod                   string `json:"HttpMethod"`
		InvocationRateLimitPerSecond int    `json:"InvocationRateLimitPerSecond"`
	}
	if a := decodeBody(body, &in); a != nil {
		return nil, a
	}
	if !nameRE.MatchString(in.Name) {
		return nil, validation("1 validation error detected: Value '" + in.Name + "' at 'name' failed to satisfy constraint: Member must satisfy regular expression pattern: [\\.\\-_A-Za-z0-9]+")
	}
	if !httpMethods[in.HTTPMethod] {
		return nil, validation("1 validation error detected: Value '" + in.HTTPMethod + "' at 'httpMethod' failed to satisfy constraint: Member must satisfy enum value set: [POST, GET, HEAD, OPTIONS, PUT, PATCH, DELETE]")
	}
	if u, err := url.Parse(in.InvocationEndpoint); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, validation("Parameter InvocationEndpoint is not valid: an http(s) URL is required.")
	}
	if in.InvocationRateLimitPerSecond == 0 {
		in.InvocationRateLimitPerSecond = 300
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if !strings.Contains(in.ConnectionArn, ":connection/") || e.connections[connectionName(in.ConnectionArn)] == nil {
		return nil, resourceNotFound("Connection " + in.ConnectionArn)
	}
	if _, ok := e.destinations[in.Name]; ok {
		return nil, &apiError{status: http.StatusBadRequest, code: "ResourceAlreadyExistsException", message: "API destination " + in.Name + " already exists."}
	}
	d := &apiDestination{name: in.Name, connectionARN: in.ConnectionArn, endpoint: in.InvocationEndpoint, method: in.HTTPMethod,
		rateLimit: in.InvocationRateLimitPerSecond, created: e.opts.Now().UTC()}
	e.destinations[in.Name] = d
	ts := epoch(d.created)
	return map[string]any{"ApiDestinationArn": e.APIDestinationARN(in.Name), "ApiDestinationState": "ACTIVE", "CreationTime": ts, "LastModifiedTime": ts}, nil
}

func (e *Emulator) describeAPIDestination(body []byte) (any, *apiError) {
	var in struct {
		Name string `json:"Name"`
	}
	if a := decodeBody(body, &in); a != nil {
		return nil, a
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	d, ok := e.destinations[in.Name]
	if !ok {
		return nil, resourceNotFound("API destination " + in.Name)
	}
	return map[string]any{"Name": d.name, "ApiDestinationArn": e.APIDestinationARN(d.name), "ApiDestinationState": "ACTIVE",
		"ConnectionArn": d.connectionARN, "InvocationEndpoint": d.endpoint, "HttpMethod": d.method,
		"InvocationRateLimitPerSecond": d.rateLimit, "CreationTime": epoch(d.created)}, nil
}

func (e *Emulator) deleteAPIDestination(body []byte) (any, *apiError) {
	var in struct {
		Name string `json:"Name"`
	}
	if a := decodeBody(body, &in); a != nil {
		return nil, a
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.destinations[in.Name]; !ok {
		return nil, resourceNotFound("API destination " + in.Name)
	}
	delete(e.destinations, in.Name)
	return struct{}{}, nil
}
