"""The example server: the HTTP app mounted into `langgraph dev`, its auth, the companion graph
and its responder. Top floor: may import anything below; nothing in `recall` imports it.
"""
