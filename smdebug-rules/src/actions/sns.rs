//! The SNS action: SageMaker Debugger's e-mail and SMS notifications, as smdebug's
//! `MessageAction` sends them: the topic created (or found: `CreateTopic` returns the existing
//! one), the endpoint subscribed once with a filter policy naming it, the finding published
//! with a message attribute naming the endpoint, so that several people can share one topic.

use std::time::Duration;

use aws_config::BehaviorVersion;
use aws_config::timeout::TimeoutConfig;
use aws_sdk_sns::Client;
use aws_sdk_sns::error::DisplayErrorContext;
use aws_sdk_sns::types::MessageAttributeValue;

/// Where a notification goes.
pub(super) struct Target<'a> {
    /// The subscription's protocol as SNS names it (`email`, `sms`).
    pub protocol: &'static str,
    /// The filter policy's and message attribute's key smdebug uses for it (`email`,
    /// `phone_num`).
    pub attribute: &'static str,
    pub endpoint: &'a str,
    pub topic: &'a str,
    pub region: Option<&'a str>,
    pub endpoint_url: Option<&'a str>,
    pub timeout: Duration,
}

/// The region: the action's, else the environment's, else smdebug's `us-east-1` (never the
/// instance metadata service, which a machine off EC2 makes wait).
fn region(target: &Target<'_>) -> String {
    target
        .region
        .map(str::to_string)
        .or_else(|| std::env::var("AWS_REGION").ok())
        .or_else(|| std::env::var("AWS_DEFAULT_REGION").ok())
        .filter(|r| !r.is_empty())
        .unwrap_or_else(|| "us-east-1".to_string())
}

/// An SDK error in words, with a hint when what is missing is credentials.
fn described(op: &str, e: impl std::error::Error) -> String {
    let text = DisplayErrorContext(&e).to_string();
    if text.to_ascii_lowercase().contains("credential") {
        format!(
            "SNS {op}: no usable AWS credentials (set AWS_ACCESS_KEY_ID and \
             AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or run with a role): {text}"
        )
    } else {
        format!("SNS {op}: {text}")
    }
}

/// Publishes `body` under `subject` to the target's topic, creating the topic and the
/// subscription first when they are missing.
pub(super) fn notify(target: &Target<'_>, subject: &str, body: &str) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("SNS: cannot start a runtime: {e}"))?;
    runtime.block_on(send(target, subject, body))
}

async fn send(target: &Target<'_>, subject: &str, body: &str) -> Result<(), String> {
    let mut loader = aws_config::defaults(BehaviorVersion::latest())
        .region(aws_config::Region::new(region(target)))
        .timeout_config(
            TimeoutConfig::builder()
                .operation_timeout(target.timeout)
                .build(),
        );
    if let Some(url) = target.endpoint_url {
        loader = loader.endpoint_url(url);
    }
    let client = Client::new(&loader.load().await);
    let topic_arn = client
        .create_topic()
        .name(target.topic)
        .send()
        .await
        .map_err(|e| described("CreateTopic", e))?
        .topic_arn
        .ok_or_else(|| format!("SNS CreateTopic `{}` returned no topic ARN", target.topic))?;
    subscribe_once(&client, &topic_arn, target).await?;
    let key = target.attribute;
    let value = MessageAttributeValue::builder()
        .data_type("String")
        .string_value(target.endpoint)
        .build()
        .map_err(|e| format!("SNS message attribute: {e}"))?;
    client
        .publish()
        .topic_arn(&topic_arn)
        .subject(subject)
        .message(body)
        .message_attributes(key, value)
        .send()
        .await
        .map_err(|e| described("Publish", e))?;
    Ok(())
}

/// Subscribes the endpoint unless the topic has it already (an e-mail address is subscribed
/// once, however many rules and jobs notify it).
async fn subscribe_once(
    client: &Client,
    topic_arn: &str,
    target: &Target<'_>,
) -> Result<(), String> {
    let protocol = target.protocol;
    let mut token: Option<String> = None;
    loop {
        let page = client
            .list_subscriptions_by_topic()
            .topic_arn(topic_arn)
            .set_next_token(token.take())
            .send()
            .await
            .map_err(|e| described("ListSubscriptionsByTopic", e))?;
        let found = page
            .subscriptions()
            .iter()
            .any(|s| s.protocol() == Some(protocol) && s.endpoint() == Some(target.endpoint));
        if found {
            return Ok(());
        }
        match page.next_token {
            Some(next) if !next.is_empty() => token = Some(next),
            _ => break,
        }
    }
    let policy = serde_json::json!({ target.attribute: [target.endpoint] });
    client
        .subscribe()
        .topic_arn(topic_arn)
        .protocol(protocol)
        .endpoint(target.endpoint)
        .attributes("FilterPolicy", policy.to_string())
        .send()
        .await
        .map_err(|e| described("Subscribe", e))?;
    Ok(())
}
