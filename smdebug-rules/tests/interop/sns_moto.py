"""What a moto SNS server holds, through boto3 (a real SNS client).

    sns_moto.py ENDPOINT listen TOPIC      create TOPIC and an SQS queue subscribed to it (raw
                                           delivery); print the topic's ARN
    sns_moto.py ENDPOINT report TOPIC      print JSON: the topic's subscriptions (protocol,
                                           endpoint, filter policy) and every message the queue
                                           received (body, subject, attributes)
"""
import json
import sys

import boto3

QUEUE = "smdebug-sns-listener"


def clients(endpoint):
    kw = dict(
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    return boto3.client("sns", **kw), boto3.client("sqs", **kw)


def topic_arn(sns, name):
    return sns.create_topic(Name=name)["TopicArn"]


def listen(sns, sqs, topic):
    arn = topic_arn(sns, topic)
    url = sqs.create_queue(QueueName=QUEUE)["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    sns.subscribe(
        TopicArn=arn,
        Protocol="sqs",
        Endpoint=queue_arn,
        Attributes={"RawMessageDelivery": "false"},
    )
    print(arn)


def report(sns, sqs, topic):
    arn = topic_arn(sns, topic)
    subs = []
    for page in sns.get_paginator("list_subscriptions_by_topic").paginate(TopicArn=arn):
        for s in page["Subscriptions"]:
            attrs = sns.get_subscription_attributes(SubscriptionArn=s["SubscriptionArn"])[
                "Attributes"
            ]
            subs.append(
                {
                    "protocol": s["Protocol"],
                    "endpoint": s["Endpoint"],
                    "filter_policy": json.loads(attrs.get("FilterPolicy", "null")),
                }
            )
    url = sqs.get_queue_url(QueueName=QUEUE)["QueueUrl"]
    messages = []
    while True:
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0)
        batch = got.get("Messages", [])
        if not batch:
            break
        for m in batch:
            envelope = json.loads(m["Body"])
            messages.append(
                {
                    "message": envelope.get("Message"),
                    "subject": envelope.get("Subject"),
                    "attributes": {
                        k: v.get("Value") for k, v in envelope.get("MessageAttributes", {}).items()
                    },
                }
            )
            sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    print(json.dumps({"subscriptions": subs, "messages": messages}))


def main():
    endpoint, command, topic = sys.argv[1:4]
    sns, sqs = clients(endpoint)
    {"listen": listen, "report": report}[command](sns, sqs, topic)


if __name__ == "__main__":
    main()
