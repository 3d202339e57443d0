//! A realistic 200-tool catalog of MCP-style tools (`github_create_issue`, `slack_post_message`,
//! `postgres_query`, …), generated deterministically, for measuring progressive tool disclosure
//! (`tool_disclosure`, issue 43): what a request declaring all of them sends upstream with and
//! without disclosure, and what a discovery round costs the gateway.
//!
//! Ten tools are written out by hand; the other 190 come from nineteen services (GitHub,
//! GitLab, Slack, Jira, …), two resources each and five operations per resource (create, get,
//! list, update, delete), each with a multi-sentence description and a JSON Schema of 3 to 8
//! described properties (enums, bounds, arrays, nested objects where natural). Every tool
//! also has arguments valid against its schema: what the scripted model calls it with.

use bytes::Bytes;
use serde_json::{Map, Value, json};

/// How many tools the catalog holds.
pub const TOOLS: usize = 200;

/// The model the requests and the scripted answers name.
pub const MODEL: &str = "gpt-4o-2024-08-06";

/// One property of a tool's schema, and a value valid against it.
struct Prop {
    name: String,
    schema: Value,
    example: Value,
    required: bool,
}

impl Prop {
    fn new(name: &str, schema: Value, example: Value) -> Prop {
        Prop {
            name: name.to_owned(),
            schema,
            example,
            required: false,
        }
    }

    fn required(mut self) -> Prop {
        self.required = true;
        self
    }
}

/// A string property.
fn text(name: &str, description: &str, example: &str) -> Prop {
    Prop::new(
        name,
        json!({"type": "string", "description": description}),
        json!(example),
    )
}

/// A string property of a fixed set of values; its example is the first.
fn choice(name: &str, description: &str, options: &[&str]) -> Prop {
    Prop::new(
        name,
        json!({"type": "string", "description": description, "enum": options}),
        json!(options.first().copied().unwrap_or_default()),
    )
}

/// An integer property between `minimum` and `maximum`.
fn integer(name: &str, description: &str, minimum: i64, maximum: i64, example: i64) -> Prop {
    Prop::new(
        name,
        json!({"type": "integer", "description": description, "minimum": minimum, "maximum": maximum}),
        json!(example),
    )
}

/// A boolean property.
fn flag(name: &str, description: &str, example: bool) -> Prop {
    Prop::new(
        name,
        json!({"type": "boolean", "description": description}),
        json!(example),
    )
}

/// An array of strings.
fn strings(name: &str, description: &str, example: &[&str]) -> Prop {
    Prop::new(
        name,
        json!({"type": "array", "description": description, "items": {"type": "string"}}),
        json!(example),
    )
}

/// A nested object of `props`, closed to others.
fn object(name: &str, description: &str, props: Vec<Prop>) -> Prop {
    let (schema, example) = schema_of(props);
    let mut schema = schema;
    schema["description"] = json!(description);
    Prop::new(name, schema, example)
}

/// The object schema of `props` and an example object holding every one of them.
fn schema_of(props: Vec<Prop>) -> (Value, Value) {
    let mut properties = Map::new();
    let mut example = Map::new();
    let mut required = Vec::new();
    for prop in props {
        if prop.required {
            required.push(json!(prop.name));
        }
        example.insert(prop.name.clone(), prop.example);
        properties.insert(prop.name, prop.schema);
    }
    let mut schema = json!({"type": "object", "properties": properties});
    if !required.is_empty() {
        schema["required"] = Value::Array(required);
    }
    schema["additionalProperties"] = json!(false);
    (schema, Value::Object(example))
}

/// One tool of the catalog.
#[derive(Debug, Clone)]
pub struct Tool {
    pub name: String,
    pub description: String,
    /// The JSON Schema of its arguments.
    pub parameters: Value,
    /// Arguments valid against `parameters` (JSON text), as the scripted model passes them.
    pub arguments: String,
    /// How many top-level properties its schema has.
    pub properties: usize,
}

impl Tool {
    fn new(name: &str, description: &str, props: Vec<Prop>) -> Tool {
        let properties = props.len();
        let (parameters, example) = schema_of(props);
        Tool {
            name: name.to_owned(),
            description: description.to_owned(),
            parameters,
            arguments: example.to_string(),
            properties,
        }
    }

    /// The tool as a chat-completions request declares it.
    pub fn declaration(&self) -> Value {
        json!({"type": "function", "function": {
            "name": self.name, "description": self.description, "parameters": self.parameters}})
    }
}

/// A kind of record a service holds, and what its operations are written with.
struct Resource {
    noun: &'static str,
    plural: &'static str,
    /// A sentence about what the record is.
    about: &'static str,
    /// The field that names a record (`title`, `name`, `summary`, …).
    title_field: &'static str,
    title_example: &'static str,
    /// The states a record can be in.
    states: &'static [&'static str],
}

/// An MCP server's worth of tools: a prefix, where its records live, and two kinds of record.
struct Service {
    prefix: &'static str,
    /// Where its records are, for the descriptions ("in a GitHub repository").
    place: &'static str,
    /// A sentence on access, limits or conventions, ending every description.
    note: &'static str,
    /// The properties that say where (owner and repo, a project key, …): name, description,
    /// example. Required in every operation.
    scope: &'static [(&'static str, &'static str, &'static str)],
    resources: [Resource; 2],
}

const SERVICES: [Service; 19] = [
    Service {
        prefix: "github",
        place: "in a GitHub repository",
        note: "Needs a token with the `repo` scope for private repositories; GitHub allows 5,000 calls an hour per token.",
        scope: &[
            (
                "owner",
                "The account or organization that owns the repository, e.g. `acme`.",
                "acme",
            ),
            (
                "repo",
                "The repository's name without its owner, e.g. `web`.",
                "web",
            ),
        ],
        resources: [
            Resource {
                noun: "issue",
                plural: "issues",
                about: "Issues track bugs, tasks and ideas, and can be labelled, assigned and linked from commits.",
                title_field: "title",
                title_example: "Login test fails on Safari 17",
                states: &["open", "closed"],
            },
            Resource {
                noun: "pull_request",
                plural: "pull_requests",
                about: "A pull request proposes the commits of one branch for merging into another, with review and checks.",
                title_field: "title",
                title_example: "Fix the Safari login redirect",
                states: &["open", "closed", "merged"],
            },
        ],
    },
    Service {
        prefix: "gitlab",
        place: "in a GitLab project",
        note: "Works with gitlab.com and self-managed instances from version 15; the token needs the `api` scope.",
        scope: &[(
            "project_id",
            "The project's numeric id or its URL-encoded path, e.g. `acme%2Fweb`.",
            "acme%2Fweb",
        )],
        resources: [
            Resource {
                noun: "merge_request",
                plural: "merge_requests",
                about: "A merge request asks to merge a source branch into a target branch once its pipeline passes.",
                title_field: "title",
                title_example: "Draft: bump the runner image to 17.2",
                states: &["opened", "closed", "merged", "locked"],
            },
            Resource {
                noun: "pipeline_schedule",
                plural: "pipeline_schedules",
                about: "A pipeline schedule runs the project's CI pipeline on a branch at a cron interval.",
                title_field: "name",
                title_example: "Nightly end-to-end tests",
                states: &["active", "inactive"],
            },
        ],
    },
    Service {
        prefix: "slack",
        place: "in a Slack workspace",
        note: "Acts as the installed bot user, which must be a member of private channels it touches.",
        scope: &[(
            "team_id",
            "The workspace id (starts with `T`); the token's own workspace when there is one.",
            "T024BE7LD",
        )],
        resources: [
            Resource {
                noun: "reminder",
                plural: "reminders",
                about: "A reminder makes Slackbot post a message to a person at a set time, once or on a schedule.",
                title_field: "text",
                title_example: "Review the on-call handover notes",
                states: &["pending", "complete"],
            },
            Resource {
                noun: "user_group",
                plural: "user_groups",
                about: "A user group is a mentionable handle, like @oncall, that notifies all of its members.",
                title_field: "name",
                title_example: "oncall-web",
                states: &["enabled", "disabled"],
            },
        ],
    },
    Service {
        prefix: "jira",
        place: "in a Jira Cloud project",
        note: "Uses the Jira Cloud REST API v3; text fields accept Markdown and are converted to Atlassian Document Format.",
        scope: &[(
            "project_key",
            "The project's key, the prefix of its issue keys, e.g. `WEB`.",
            "WEB",
        )],
        resources: [
            Resource {
                noun: "issue",
                plural: "issues",
                about: "Issues are the project's units of work: stories, bugs, tasks and epics, moved through its workflow.",
                title_field: "summary",
                title_example: "Safari users are logged out after the redirect",
                states: &["to_do", "in_progress", "in_review", "done"],
            },
            Resource {
                noun: "sprint",
                plural: "sprints",
                about: "A sprint is a time box on a Scrum board holding the issues the team commits to.",
                title_field: "name",
                title_example: "WEB Sprint 42",
                states: &["future", "active", "closed"],
            },
        ],
    },
    Service {
        prefix: "linear",
        place: "in a Linear team",
        note: "Linear rate-limits API keys to 1,500 requests an hour; identifiers like `ENG-123` work wherever an id is asked for.",
        scope: &[("team_id", "The team's id or key, e.g. `ENG`.", "ENG")],
        resources: [
            Resource {
                noun: "issue",
                plural: "issues",
                about: "Linear issues carry a priority, an estimate, a cycle and a workflow state.",
                title_field: "title",
                title_example: "Retry webhook deliveries with backoff",
                states: &["backlog", "todo", "in_progress", "done", "canceled"],
            },
            Resource {
                noun: "project",
                plural: "projects",
                about: "A project groups issues toward a dated goal and reports its progress to the teams involved.",
                title_field: "name",
                title_example: "Billing v2 migration",
                states: &["planned", "started", "paused", "completed"],
            },
        ],
    },
    Service {
        prefix: "notion",
        place: "in the Notion workspace",
        note: "Only pages and databases shared with the integration are visible to it.",
        scope: &[],
        resources: [
            Resource {
                noun: "page",
                plural: "pages",
                about: "A page holds blocks of content and may sit inside another page or a database.",
                title_field: "title",
                title_example: "Incident review: login outage of 3 June",
                states: &["active", "archived"],
            },
            Resource {
                noun: "database",
                plural: "databases",
                about: "A database is a collection of pages sharing a schema of typed properties.",
                title_field: "title",
                title_example: "Postmortems",
                states: &["active", "archived"],
            },
        ],
    },
    Service {
        prefix: "google_drive",
        place: "in Google Drive",
        note: "Shared drives need the `supportsAllDrives` capability, which this server always sets.",
        scope: &[(
            "drive_id",
            "The shared drive's id, or `my-drive` for the user's own drive.",
            "my-drive",
        )],
        resources: [
            Resource {
                noun: "file",
                plural: "files",
                about: "A file is any stored document, including Google Docs, Sheets and Slides and uploaded binaries.",
                title_field: "name",
                title_example: "Q3 board deck",
                states: &["active", "trashed"],
            },
            Resource {
                noun: "folder",
                plural: "folders",
                about: "A folder groups files and carries sharing settings its contents inherit.",
                title_field: "name",
                title_example: "Finance / 2025",
                states: &["active", "trashed"],
            },
        ],
    },
    Service {
        prefix: "gmail",
        place: "in the user's Gmail mailbox",
        note: "Acts for the signed-in user only; messages are never sent without an explicit request.",
        scope: &[(
            "user_id",
            "The mailbox, `me` for the signed-in user or a delegated address.",
            "me",
        )],
        resources: [
            Resource {
                noun: "draft",
                plural: "drafts",
                about: "A draft is an unsent message that can be edited and later sent as is.",
                title_field: "subject",
                title_example: "Re: contract renewal for 2026",
                states: &["draft", "scheduled"],
            },
            Resource {
                noun: "label",
                plural: "labels",
                about: "Labels organize threads; a thread may carry several, and system labels like INBOX cannot be removed.",
                title_field: "name",
                title_example: "Vendors/Invoices",
                states: &["shown", "hidden"],
            },
        ],
    },
    Service {
        prefix: "google_calendar",
        place: "in a Google Calendar",
        note: "Times are RFC 3339 with an offset; all-day events use dates without a time.",
        scope: &[(
            "calendar_id",
            "The calendar's id, or `primary` for the user's main calendar.",
            "primary",
        )],
        resources: [
            Resource {
                noun: "event",
                plural: "events",
                about: "An event has a start, an end, attendees and optional recurrence and conferencing.",
                title_field: "summary",
                title_example: "Quarterly planning",
                states: &["confirmed", "tentative", "cancelled"],
            },
            Resource {
                noun: "acl_rule",
                plural: "acl_rules",
                about: "An access rule shares the calendar with a person, a group or a domain at one role, from seeing free/busy times to owning it.",
                title_field: "scope_value",
                title_example: "web-team@acme.example",
                states: &["free_busy_reader", "reader", "writer", "owner"],
            },
        ],
    },
    Service {
        prefix: "stripe",
        place: "in the Stripe account",
        note: "Amounts are in the currency's smallest unit (cents for USD); test-mode keys only see test data.",
        scope: &[],
        resources: [
            Resource {
                noun: "customer",
                plural: "customers",
                about: "A customer holds payment methods, subscriptions and the invoices billed to them.",
                title_field: "name",
                title_example: "Northwind Traders",
                states: &["active", "deleted"],
            },
            Resource {
                noun: "invoice",
                plural: "invoices",
                about: "An invoice lists what a customer owes and is paid automatically or by the customer.",
                title_field: "memo",
                title_example: "Consulting, September 2025",
                states: &["draft", "open", "paid", "void", "uncollectible"],
            },
        ],
    },
    Service {
        prefix: "aws_s3",
        place: "in an Amazon S3 bucket",
        note: "Uses the server's IAM role; a bucket in another region is reached through its regional endpoint.",
        scope: &[
            (
                "region",
                "The bucket's AWS region, e.g. `eu-west-1`.",
                "eu-west-1",
            ),
            (
                "bucket",
                "The bucket's name, without `s3://`.",
                "acme-reports",
            ),
        ],
        resources: [
            Resource {
                noun: "object",
                plural: "objects",
                about: "An object is a stored blob under a key, with metadata and a storage class.",
                title_field: "key",
                title_example: "exports/2025/09/orders.csv",
                states: &["current", "noncurrent"],
            },
            Resource {
                noun: "lifecycle_rule",
                plural: "lifecycle_rules",
                about: "A lifecycle rule moves or expires the objects under a prefix after a number of days.",
                title_field: "rule_name",
                title_example: "expire-tmp-after-7-days",
                states: &["enabled", "disabled"],
            },
        ],
    },
    Service {
        prefix: "kubernetes",
        place: "in a Kubernetes namespace",
        note: "Runs with the permissions of the server's service account; changes go through the API server's admission checks.",
        scope: &[
            (
                "cluster",
                "The kubeconfig context naming the cluster, e.g. `prod-eu`.",
                "prod-eu",
            ),
            ("namespace", "The namespace, e.g. `web`.", "web"),
        ],
        resources: [
            Resource {
                noun: "deployment",
                plural: "deployments",
                about: "A deployment keeps a number of replicas of a pod template running and rolls out changes to it.",
                title_field: "name",
                title_example: "checkout-api",
                states: &["available", "progressing", "failed"],
            },
            Resource {
                noun: "config_map",
                plural: "config_maps",
                about: "A config map holds non-secret configuration that pods read as files or environment variables.",
                title_field: "name",
                title_example: "checkout-api-config",
                states: &["mutable", "immutable"],
            },
        ],
    },
    Service {
        prefix: "sentry",
        place: "in a Sentry project",
        note: "Event data older than the plan's retention (90 days by default) is gone.",
        scope: &[
            (
                "organization_slug",
                "The organization's slug, e.g. `acme`.",
                "acme",
            ),
            (
                "project_slug",
                "The project's slug, e.g. `web-frontend`.",
                "web-frontend",
            ),
        ],
        resources: [
            Resource {
                noun: "issue",
                plural: "issues",
                about: "A Sentry issue groups error events with the same fingerprint, with counts and affected users.",
                title_field: "title",
                title_example: "TypeError: Cannot read properties of undefined (reading 'token')",
                states: &["unresolved", "resolved", "ignored"],
            },
            Resource {
                noun: "release",
                plural: "releases",
                about: "A release ties a version to its commits and deploys, so regressions point to the change that caused them.",
                title_field: "version",
                title_example: "web@2025.09.3",
                states: &["unreleased", "released"],
            },
        ],
    },
    Service {
        prefix: "datadog",
        place: "in Datadog",
        note: "Needs both an API key and an application key; the site decides the region the data lives in.",
        scope: &[(
            "site",
            "The Datadog site, e.g. `datadoghq.eu`.",
            "datadoghq.eu",
        )],
        resources: [
            Resource {
                noun: "monitor",
                plural: "monitors",
                about: "A monitor evaluates a metric, log or trace query and notifies when it crosses its thresholds.",
                title_field: "name",
                title_example: "checkout-api p99 latency above 800 ms",
                states: &["ok", "warn", "alert", "no_data"],
            },
            Resource {
                noun: "dashboard",
                plural: "dashboards",
                about: "A dashboard lays out widgets of metrics, logs and traces over a shared time frame.",
                title_field: "title",
                title_example: "Checkout overview",
                states: &["active", "archived"],
            },
        ],
    },
    Service {
        prefix: "pagerduty",
        place: "in PagerDuty",
        note: "Writes need the `From` email of a PagerDuty user, which the server takes from its configuration.",
        scope: &[],
        resources: [
            Resource {
                noun: "incident",
                plural: "incidents",
                about: "An incident pages the on-call responder of a service and escalates until someone acknowledges it.",
                title_field: "title",
                title_example: "Checkout error rate above 5%",
                states: &["triggered", "acknowledged", "resolved"],
            },
            Resource {
                noun: "maintenance_window",
                plural: "maintenance_windows",
                about: "A maintenance window silences the incidents of chosen services for a planned period.",
                title_field: "summary",
                title_example: "Database failover drill",
                states: &["future", "ongoing", "past"],
            },
        ],
    },
    Service {
        prefix: "salesforce",
        place: "in Salesforce",
        note: "Field names are API names (`StageName`, not `Stage`); custom fields end in `__c`.",
        scope: &[(
            "instance",
            "The org's My Domain host, e.g. `acme.my.salesforce.com`.",
            "acme.my.salesforce.com",
        )],
        resources: [
            Resource {
                noun: "opportunity",
                plural: "opportunities",
                about: "An opportunity is a potential deal with an amount, a close date and a stage in the sales process.",
                title_field: "name",
                title_example: "Northwind - 2026 renewal",
                states: &["prospecting", "negotiation", "closed_won", "closed_lost"],
            },
            Resource {
                noun: "contact",
                plural: "contacts",
                about: "A contact is a person at an account, with their role, email and communication preferences.",
                title_field: "last_name",
                title_example: "Fuller",
                states: &["active", "inactive"],
            },
        ],
    },
    Service {
        prefix: "hubspot",
        place: "in the HubSpot CRM",
        note: "Private-app tokens need the matching `crm.objects.*` scopes; properties are addressed by internal name.",
        scope: &[],
        resources: [
            Resource {
                noun: "deal",
                plural: "deals",
                about: "A deal tracks a sale through the stages of a pipeline, with its amount and associated companies.",
                title_field: "deal_name",
                title_example: "Contoso - analytics add-on",
                states: &[
                    "appointment_scheduled",
                    "qualified",
                    "closed_won",
                    "closed_lost",
                ],
            },
            Resource {
                noun: "company",
                plural: "companies",
                about: "A company record groups the contacts, deals and tickets of one organization.",
                title_field: "name",
                title_example: "Contoso Ltd",
                states: &["lead", "customer", "partner"],
            },
        ],
    },
    Service {
        prefix: "zendesk",
        place: "in Zendesk Support",
        note: "Agents see only the tickets of the groups they belong to; end users are never notified of internal notes.",
        scope: &[(
            "subdomain",
            "The account's subdomain, e.g. `acme` for acme.zendesk.com.",
            "acme",
        )],
        resources: [
            Resource {
                noun: "ticket",
                plural: "tickets",
                about: "A ticket is a customer request with its conversation, requester, assignee and priority.",
                title_field: "subject",
                title_example: "Cannot download my invoice",
                states: &["new", "open", "pending", "solved", "closed"],
            },
            Resource {
                noun: "macro",
                plural: "macros",
                about: "A macro applies a canned reply and a set of field changes to a ticket in one step.",
                title_field: "title",
                title_example: "Billing: refund issued",
                states: &["active", "inactive"],
            },
        ],
    },
    Service {
        prefix: "confluence",
        place: "in a Confluence space",
        note: "Content is stored in Confluence's storage format; Markdown given here is converted on write.",
        scope: &[("space_key", "The space's key, e.g. `ENG`.", "ENG")],
        resources: [
            Resource {
                noun: "page",
                plural: "pages",
                about: "A page is a versioned document in the space's page tree, with labels and restrictions.",
                title_field: "title",
                title_example: "Runbook: checkout-api",
                states: &["current", "draft", "archived"],
            },
            Resource {
                noun: "comment",
                plural: "comments",
                about: "A comment is a footer or inline remark on a page, resolved once addressed.",
                title_field: "body",
                title_example: "The failover step needs the new DNS name.",
                states: &["open", "resolved"],
            },
        ],
    },
];

/// The scope properties of a service, required.
fn scope(service: &Service) -> Vec<Prop> {
    service
        .scope
        .iter()
        .map(|(name, description, example)| text(name, description, example).required())
        .collect()
}

/// `issue` → `issue`, `pull_request` → `pull request`.
fn human(word: &str) -> String {
    word.replace('_', " ")
}

/// The five operations on one resource of a service.
fn operations(service: &Service, resource: &Resource) -> Vec<Tool> {
    let (prefix, place, note) = (service.prefix, service.place, service.note);
    let (noun, plural) = (resource.noun, resource.plural);
    let (one, many) = (human(noun), human(plural));
    let id = format!("{noun}_id");
    let id_prop = || {
        text(
            &id,
            &format!("The {one}'s id, as {prefix}_list_{plural} returns it."),
            &format!("{}-4821", &noun[..noun.len().min(3)]),
        )
        .required()
    };
    let states = resource.states;
    let last_state = states.last().copied().unwrap_or_default();

    let mut create = scope(service);
    create.push(
        text(
            resource.title_field,
            &format!(
                "The {one}'s {}, shown in lists.",
                human(resource.title_field)
            ),
            resource.title_example,
        )
        .required(),
    );
    create.push(text(
        "description",
        "Longer text in Markdown; links and code blocks are kept.",
        "Seen on the nightly run since build 2025.09.2; steps to reproduce are in the linked run.",
    ));
    create.push(strings(
        "labels",
        "Labels to add; ones that do not exist yet are created.",
        &["bug", "triage"],
    ));
    create.push(choice(
        "priority",
        "How urgent it is; `normal` when not given.",
        &["normal", "low", "high", "urgent"],
    ));

    let mut get = scope(service);
    get.push(id_prop());
    get.push(Prop::new(
        "include",
        json!({"type": "array", "description": "Related data to return with it.",
               "items": {"type": "string", "enum": ["comments", "history", "attachments", "links"]}}),
        json!(["comments"]),
    ));
    get.push(choice(
        "format",
        "`summary` for the main fields, `full` for every field, `raw` for the API's own JSON.",
        &["summary", "full", "raw"],
    ));

    let mut list = scope(service);
    list.push(choice(
        "state",
        &format!("Only {many} in this state."),
        states,
    ));
    list.push(integer(
        "limit",
        "The most results on one page.",
        1,
        100,
        25,
    ));
    list.push(text(
        "cursor",
        "The `next_cursor` of the previous page; leave out for the first page.",
        "eyJwYWdlIjoyfQ",
    ));
    list.push(object(
        "sort",
        "The order of the results.",
        vec![
            choice(
                "field",
                "The field to sort by.",
                &["updated", "created", "priority"],
            ),
            choice("direction", "Ascending or descending.", &["desc", "asc"]),
        ],
    ));
    list.push(Prop::new(
        "updated_after",
        json!({"type": "string", "format": "date-time",
               "description": "Only records changed after this time (RFC 3339)."}),
        json!("2025-09-01T00:00:00Z"),
    ));

    let mut update = scope(service);
    update.push(id_prop());
    let mut changes = vec![
        text(
            resource.title_field,
            &format!("A new {}.", human(resource.title_field)),
            resource.title_example,
        ),
        choice("state", "The state to move it to.", states),
    ];
    changes[1].example = json!(last_state);
    if resource.title_field != "description" {
        changes.push(text(
            "description",
            "A new description; replaces the old one.",
            "Fixed by the redirect change; verified on Safari 17.",
        ));
    }
    update.push(object(
        "changes",
        "The fields to change; the ones left out keep their values.",
        changes,
    ));
    update.push(flag(
        "notify",
        "Tell the people following it about the change.",
        true,
    ));
    update.push(text(
        "comment",
        "A note recorded with the change, visible in its history.",
        "Closing: fixed in 2025.09.3.",
    ));

    let mut delete = scope(service);
    delete.push(id_prop());
    delete.push(
        Prop::new(
            "confirm",
            json!({"type": "boolean", "enum": [true],
               "description": "Must be true: the deletion cannot be undone."}),
            json!(true),
        )
        .required(),
    );
    delete.push(text(
        "reason",
        "Why it is deleted, kept in the audit log.",
        "Duplicate of an existing record.",
    ));

    vec![
        Tool::new(
            &format!("{prefix}_create_{noun}"),
            &format!(
                "Creates a new {one} {place}. {} The {one} is created as the authenticated account and is visible at once to everyone with access. Returns its id and web URL; call {prefix}_get_{noun} for the full record. {note}",
                resource.about
            ),
            create,
        ),
        Tool::new(
            &format!("{prefix}_get_{noun}"),
            &format!(
                "Reads one {one} {place} by its id, with the related data asked for in `include`. {} When only its {} is known, find it with {prefix}_list_{plural} first. {note}",
                resource.about,
                human(resource.title_field)
            ),
            get,
        ),
        Tool::new(
            &format!("{prefix}_list_{plural}"),
            &format!(
                "Lists the {many} {place}, most recently updated first unless `sort` says otherwise. Results come in pages: pass a page's `next_cursor` as `cursor` to get the next one. Filter by state and by last update to keep pages small. {note}"
            ),
            list,
        ),
        Tool::new(
            &format!("{prefix}_update_{noun}"),
            &format!(
                "Changes fields of an existing {one} {place}; only the fields given in `changes` are written. Set `notify` to tell the people following it. Returns the {one} as it is after the change. {note}"
            ),
            update,
        ),
        Tool::new(
            &format!("{prefix}_delete_{noun}"),
            &format!(
                "Deletes a {one} {place}. This cannot be undone: ask the user first, and pass `confirm: true`. Prefer {prefix}_update_{noun} to change its state when the record should be kept. {note}"
            ),
            delete,
        ),
    ]
}

/// The tools written out by hand: the ones the measured conversations call, and a few that no
/// create/get/list/update/delete pattern fits.
fn handwritten() -> Vec<Tool> {
    vec![
        Tool::new(
            "get_weather",
            "Gets the current weather and a forecast for a city. Temperatures are in the unit asked for, wind in km/h or mph to match. The forecast covers up to 14 days, one entry a day, with the chance of rain and any severe-weather alerts in force.",
            vec![
                text("city", "The city, with its country when the name is ambiguous, e.g. `Paris, FR`.", "Paris, FR").required(),
                choice("unit", "The temperature unit.", &["celsius", "fahrenheit"]),
                integer("days", "How many days of forecast, today included.", 1, 14, 3),
                flag("include_alerts", "Add the severe-weather alerts in force.", true),
            ],
        ),
        Tool::new(
            "github_create_issue",
            "Creates a new issue in a GitHub repository. Issues track bugs, tasks and ideas; the body is GitHub-flavoured Markdown and may mention users and other issues. Labels, assignees and the milestone must already exist in the repository, or the call fails with 422. Returns the issue's number and URL. Needs a token with the `repo` scope for private repositories.",
            vec![
                text("owner", "The account or organization that owns the repository, e.g. `acme`.", "acme").required(),
                text("repo", "The repository's name without its owner, e.g. `web`.", "web").required(),
                text("title", "The issue's title.", "Login test fails on Safari 17").required(),
                text("body", "The issue's body in Markdown.", "The `login_redirect` test fails on Safari 17 since build 2025.09.2.\n\nSteps: run `npm test -- login` with `BROWSER=safari`."),
                strings("labels", "Names of existing labels to apply.", &["bug", "safari"]),
                strings("assignees", "Logins of the users to assign (at most 10).", &["octocat"]),
                integer("milestone", "The number of the milestone to add it to.", 1, 100_000, 12),
            ],
        ),
        Tool::new(
            "slack_post_message",
            "Posts a message to a Slack channel, a direct message or a thread. The text is Slack mrkdwn; mention people as `<@U123>` and channels as `<#C123>`. Give `thread_ts` to reply in a thread, and `reply_broadcast` to also show the reply in the channel. Returns the message's `ts`, which identifies it for edits and replies.",
            vec![
                text("channel", "The channel id (`C…`), a user id (`U…`) for a direct message, or a name like `#eng-alerts`.", "#eng-alerts").required(),
                text("text", "The message, in Slack mrkdwn.", "New issue: acme/web#4821 Login test fails on Safari 17").required(),
                text("thread_ts", "The `ts` of the message to reply to.", "1727712000.000100"),
                flag("reply_broadcast", "With `thread_ts`, also post the reply to the channel.", false),
                flag("unfurl_links", "Show previews of the links in the text.", true),
                Prop::new(
                    "blocks",
                    json!({"type": "array", "description": "Block Kit blocks; `text` is then the notification fallback.",
                           "items": {"type": "object", "properties": {
                               "type": {"type": "string", "enum": ["section", "divider", "context", "header"], "description": "The block's type."},
                               "text": {"type": "string", "description": "The block's text, for section, context and header blocks."}},
                               "required": ["type"], "additionalProperties": false}}),
                    json!([{"type": "section", "text": "*Login test fails on Safari 17*"}]),
                ),
            ],
        ),
        Tool::new(
            "postgres_query",
            "Runs one read-only SQL statement on a PostgreSQL database and returns the rows as JSON. The statement runs in a read-only transaction with a statement timeout, so writes and DDL fail. Use `$1`, `$2`, … placeholders with `params` rather than pasting values into the SQL. Large results are cut at `row_limit` rows, and the answer says when they were.",
            vec![
                choice("database", "The configured connection to run it on.", &["analytics", "app_replica", "billing"]).required(),
                text("sql", "The SQL statement: a SELECT, or a WITH … SELECT.", "SELECT status, count(*) FROM orders WHERE created_at >= $1 GROUP BY status").required(),
                Prop::new(
                    "params",
                    json!({"type": "array", "description": "Values for the placeholders, in order.",
                           "items": {"type": ["string", "number", "boolean", "null"]}}),
                    json!(["2025-09-01"]),
                ),
                integer("row_limit", "The most rows to return.", 1, 10_000, 500),
                integer("timeout_ms", "The statement timeout in milliseconds.", 100, 120_000, 15_000),
            ],
        ),
        Tool::new(
            "postgres_describe_table",
            "Describes a PostgreSQL table: its columns with types, defaults and nullability, its constraints and, when asked, its indexes and approximate row count. Use it before writing a query against a table you have not seen. Views and materialized views are described the same way.",
            vec![
                choice("database", "The configured connection.", &["analytics", "app_replica", "billing"]).required(),
                text("schema", "The schema the table is in.", "public"),
                text("table", "The table's name.", "orders").required(),
                flag("include_indexes", "Also list the table's indexes with their definitions.", true),
            ],
        ),
        Tool::new(
            "postgres_list_tables",
            "Lists the tables and views of a PostgreSQL database, optionally of one schema or matching a name pattern. Each entry has its kind, its approximate row count and its comment. System schemas are left out unless asked for.",
            vec![
                choice("database", "The configured connection.", &["analytics", "app_replica", "billing"]).required(),
                text("schema", "Only this schema.", "public"),
                text("name_like", "A SQL LIKE pattern on the table name, e.g. `order%`.", "order%"),
                flag("include_system", "Include pg_catalog and information_schema.", false),
            ],
        ),
        Tool::new(
            "filesystem_read_file",
            "Reads a file from the allowed directories of the workspace. Text is returned as UTF-8; binary files come back base64-encoded. Give `offset` and `length` to read part of a large file; the answer says the file's total size. Paths outside the allowed directories are refused.",
            vec![
                text("path", "The file's absolute path.", "/workspace/web/src/login.ts").required(),
                choice("encoding", "How to return the content.", &["utf-8", "base64"]),
                integer("offset", "The byte to start reading at.", 0, 1_000_000_000, 0),
                integer("length", "The most bytes to read.", 1, 10_485_760, 65_536),
            ],
        ),
        Tool::new(
            "browser_fetch_page",
            "Fetches a web page and returns its main content as Markdown, with links kept. Scripts are run in a headless browser when `render` is set, for pages that build their content client-side. Responses over 5 MB are cut. Only http and https URLs are fetched, and private network addresses are refused.",
            vec![
                text("url", "The page's URL.", "https://status.example.com/").required(),
                flag("render", "Run the page's scripts before reading it.", false),
                integer("timeout_s", "Give up after this many seconds.", 1, 60, 20),
                object(
                    "headers",
                    "Request headers to send.",
                    vec![
                        text("accept_language", "The Accept-Language header.", "en-GB"),
                        text("user_agent", "The User-Agent header.", "acme-agent/1.0"),
                    ],
                ),
            ],
        ),
        Tool::new(
            "gmail_send_message",
            "Sends an email from the user's Gmail account. The body is plain text unless `html` is set. Attachments are taken from Google Drive by file id. The message is sent at once and cannot be recalled, so confirm recipients and content with the user first.",
            vec![
                Prop::new(
                    "to",
                    json!({"type": "array", "description": "Recipients' addresses.", "minItems": 1,
                           "items": {"type": "string", "format": "email"}}),
                    json!(["bob@example.com"]),
                ).required(),
                strings("cc", "Copied recipients' addresses.", &["carol@example.com"]),
                text("subject", "The subject line.", "Q3 report").required(),
                text("body", "The message body.", "Hi Bob, the Q3 report is attached.").required(),
                flag("html", "The body is HTML.", false),
                Prop::new(
                    "attachments",
                    json!({"type": "array", "description": "Files from Google Drive to attach.",
                           "items": {"type": "object", "properties": {
                               "drive_file_id": {"type": "string", "description": "The Drive file's id."},
                               "filename": {"type": "string", "description": "The name to give the attachment."}},
                               "required": ["drive_file_id"], "additionalProperties": false}}),
                    json!([{"drive_file_id": "1A2b3C4d5E", "filename": "q3-report.pdf"}]),
                ),
            ],
        ),
        Tool::new(
            "kubernetes_get_pod_logs",
            "Reads the logs of a pod's container in a Kubernetes namespace. Give `previous` to read the logs of the container's last terminated run, which is where a crash-looping container's error is. Output is cut at `tail_lines` lines from the end. Runs with the permissions of the server's service account.",
            vec![
                text("cluster", "The kubeconfig context naming the cluster, e.g. `prod-eu`.", "prod-eu").required(),
                text("namespace", "The namespace, e.g. `web`.", "web").required(),
                text("pod", "The pod's name.", "checkout-api-7d9f8b6c4-x2lqp").required(),
                text("container", "The container; the pod's only one when left out.", "api"),
                integer("tail_lines", "How many lines from the end.", 1, 5_000, 200),
                integer("since_seconds", "Only lines from the last this many seconds.", 1, 604_800, 3_600),
                flag("previous", "Read the previous run of the container.", false),
            ],
        ),
        Tool::new(
            "stripe_create_refund",
            "Refunds all or part of a Stripe payment. Without `amount` the whole remaining amount is refunded. The refund goes back to the original payment method and takes 5 to 10 business days to reach the customer; it cannot be cancelled once it succeeded. Amounts are in the currency's smallest unit.",
            vec![
                text("payment_intent", "The payment's PaymentIntent id (`pi_…`).", "pi_3PqR7sKZ2b").required(),
                integer("amount", "The amount to refund, in the smallest currency unit.", 1, 99_999_999, 2_500),
                choice("reason", "Why, as Stripe records it.", &["requested_by_customer", "duplicate", "fraudulent"]),
                object(
                    "metadata",
                    "Key-value pairs stored with the refund.",
                    vec![
                        text("ticket", "The support ticket this refund answers.", "ZD-1182"),
                        text("approved_by", "Who approved it.", "finance@acme.example"),
                    ],
                ),
            ],
        ),
    ]
}

/// The 200 tools, grouped by service as an MCP client lists them: the hand-written ones first
/// in their group (`github_create_issue` in place of the generated one of that name).
pub fn catalog() -> Vec<Tool> {
    let mut written = handwritten();
    let mut tools: Vec<Tool> = Vec::with_capacity(TOOLS);
    // Tools of no generated service first.
    let services: Vec<&str> = SERVICES.iter().map(|service| service.prefix).collect();
    let belongs = |tool: &Tool, prefix: &str| tool.name.starts_with(&format!("{prefix}_"));
    let (loose, rest): (Vec<Tool>, Vec<Tool>) = written
        .drain(..)
        .partition(|tool| !services.iter().any(|prefix| belongs(tool, prefix)));
    written = rest;
    tools.extend(loose);
    for service in &SERVICES {
        let (own, rest): (Vec<Tool>, Vec<Tool>) = written
            .drain(..)
            .partition(|tool| belongs(tool, service.prefix));
        written = rest;
        let own_names: Vec<String> = own.iter().map(|tool| tool.name.clone()).collect();
        tools.extend(own);
        for resource in &service.resources {
            tools.extend(
                operations(service, resource)
                    .into_iter()
                    .filter(|tool| !own_names.contains(&tool.name)),
            );
        }
    }
    tools.extend(written);
    tools
}

/// The conversation's system prompt.
pub const SYSTEM_PROMPT: &str = "You are Acme's engineering assistant. You work in the team's GitHub, Slack, Jira, databases and cloud accounts through the tools given. Ask before anything destructive, and say which tool you used for each step.";
/// The user's turn the measured conversations answer.
pub const USER_TURN: &str = "The login test fails on Safari 17 again since last night's build. Open an issue for it in acme/web and post the link in #eng-alerts.";

/// A chat-completions request declaring every tool of `tools`.
pub fn request_body(tools: &[Tool]) -> Bytes {
    let body = json!({
        "model": MODEL,
        "messages": [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": USER_TURN},
        ],
        "tools": tools.iter().map(Tool::declaration).collect::<Vec<_>>(),
        "tool_choice": "auto",
        "temperature": 0.2,
    });
    Bytes::from(body.to_string())
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn the_catalog_holds_200_distinct_tools_of_3_to_8_described_properties() {
        let tools = catalog();
        assert_eq!(tools.len(), TOOLS);
        let names: HashSet<&str> = tools.iter().map(|tool| tool.name.as_str()).collect();
        assert_eq!(names.len(), TOOLS, "names are distinct");
        for name in [
            "github_create_issue",
            "slack_post_message",
            "postgres_query",
            "get_weather",
        ] {
            assert!(names.contains(name), "{name}");
        }
        for tool in &tools {
            assert_eq!(
                tool.parameters["properties"].as_object().map(Map::len),
                Some(tool.properties),
                "{}: no property written twice",
                tool.name
            );
            assert!(
                (3..=8).contains(&tool.properties),
                "{}: {} properties",
                tool.name,
                tool.properties
            );
            assert!(
                tool.description.matches(". ").count() >= 2,
                "{}: several sentences",
                tool.name
            );
            let properties = tool.parameters["properties"]
                .as_object()
                .expect("an object schema");
            for (name, schema) in properties {
                assert!(
                    schema["description"].is_string(),
                    "{}.{name} is described",
                    tool.name
                );
            }
        }
    }

    #[test]
    fn every_tools_arguments_are_valid_against_its_schema() {
        for tool in catalog() {
            let validator = jsonschema::validator_for(&tool.parameters).expect("a valid schema");
            let arguments: Value = serde_json::from_str(&tool.arguments).expect("JSON");
            let errors: Vec<String> = validator
                .iter_errors(&arguments)
                .map(|error| error.to_string())
                .collect();
            assert!(errors.is_empty(), "{}: {errors:?}", tool.name);
        }
    }

    #[test]
    fn the_catalog_is_the_same_on_every_call() {
        assert_eq!(request_body(&catalog()), request_body(&catalog()));
    }
}
