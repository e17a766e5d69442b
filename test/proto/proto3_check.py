#!/usr/bin/python3
"""proto3_check.py DESCRIPTOR_SET MESSAGE_TYPE < JSON

Judge a JSON document as protobuf's own proto3 JSON mapping does. Prints one
line:
  exact          the document parses as MESSAGE_TYPE with unknown fields
                 refused, and printing the message back (the printer's
                 default options) gives the same JSON value;
  differs: ...   it parses, but the printer writes something else;
  refused: ...   the parser refuses it.
"""
import json
import sys

from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory


def message_class(pool, name):
    desc = pool.FindMessageTypeByName(name)
    if hasattr(message_factory, 'GetMessageClass'):
        return message_factory.GetMessageClass(desc)
    return message_factory.MessageFactory(pool).GetPrototype(desc)


def main():
    fds = descriptor_pb2.FileDescriptorSet()
    with open(sys.argv[1], 'rb') as f:
        fds.ParseFromString(f.read())
    pool = descriptor_pool.DescriptorPool()
    for fd in fds.file:
        pool.Add(fd)
    text = sys.stdin.read()
    msg = message_class(pool, sys.argv[2])()
    try:
        json_format.Parse(text, msg, ignore_unknown_fields=False, descriptor_pool=pool)
    except json_format.ParseError as e:
        print('refused: %s' % str(e).replace('\n', ' '))
        return
    printed = json_format.MessageToDict(msg, descriptor_pool=pool)
    given = json.loads(text)
    if printed == given:
        print('exact')
    else:
        print('differs: printer writes %s' % json.dumps(printed, sort_keys=True))


main()
