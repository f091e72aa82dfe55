"""The example server's parts that `langgraph dev` loads by path (langgraph.json): the HTTP app
(`app`: health, stats and metrics, and the store opened once in its lifespan) and the bearer
token auth (`auth`). Top floor: may import anything below; nothing in `recall` imports it.
"""
